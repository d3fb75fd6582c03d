"""The one long-lived HTTP connection pool of a client, behind one small interface.

Measured on this machine (docs/connector.md, docs/benchmarks.md): httpx's own async pool slows down
as concurrency grows (encode/httpx#3215); even over aiohttp's pool httpx's request and response
objects cost about half of a call; and aiohttp's own client, called bare, spends more CPU per call
than all the rest of the pipeline's fetch. The default (`transport="http1"`) therefore writes
HTTP/1.1 itself over asyncio's sockets and parses answers with httptools (connectors/http1.py).
aiohttp serves `transport="aiohttp"` and any client whose base URL is reached through a proxy from
the environment; httpx serves `transport="httpx"` and tests that script exact answers with
`httpx.MockTransport`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Awaitable, Callable, Mapping, Protocol, TypeVar

import httpx

from . import errors, http1
from .config import Settings

log = logging.getLogger("connectors.client")
T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop where it is installed (Linux, macOS), else asyncio's own.

    Measured (docs/benchmarks.md): the same fetch spends about a third less CPU per call on uvloop; every
    callback, future and timer of a call is the loop's, and uvloop makes them in C.
    """
    try:
        import uvloop
    except ImportError:  # Windows: no uvloop
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run_calls(work: Awaitable[T]) -> T:
    """`asyncio.run(work)` on `new_event_loop()`: how a fetch task runs its chunk's calls."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(work)  # type: ignore[arg-type]  # a coroutine, as asyncio.run takes


RawResponse = http1.Response  # status, headers (lower-case names), content: what every session gives back


class HttpSession(Protocol):
    async def send(self, method: str, path: str, params: Mapping[str, str], headers: Mapping[str, str],
                   body: Any, endpoint: str) -> RawResponse: ...

    async def aclose(self) -> None: ...


Clean = Callable[[str], str]  # redacts secrets from text that may hold a URL


class AiohttpSession:
    """aiohttp's pool, used directly. Created lazily: it must be born inside the running loop."""

    def __init__(self, settings: Settings, clean: Clean) -> None:
        self._settings = settings
        self._clean = clean
        self._session: Any = None
        t = settings.timeout
        self._timeout = (t.connect, t.read, t.pool)

    def _open(self) -> Any:
        import aiohttp

        connect, read, pool = self._timeout
        self._session = aiohttp.ClientSession(
            base_url=self._settings.base_url,
            connector=aiohttp.TCPConnector(limit=self._settings.max_connections, keepalive_timeout=30),
            # `connect` covers waiting for a pooled connection too; aiohttp has no write timeout.
            timeout=aiohttp.ClientTimeout(total=None, connect=pool, sock_connect=connect, sock_read=read),
            headers={"User-Agent": self._settings.user_agent, "Accept": "application/json"},
            # trust_env would look proxies up in the environment on every request (measured: a third of
            # the throughput); they are looked up once here instead.
            trust_env=False,
            proxy=_proxy_for(self._settings.base_url or ""),
        )
        # aiohttp silently sends a GET again when the server drops the connection (aio-libs/aiohttp#10790):
        # an attempt that is neither recorded nor counted against the retry budget. Retries are ours alone.
        # No public switch exists; this private attribute is the one aiohttp's own test client turns off.
        self._session._retry_connection = False
        return self._session

    async def send(self, method: str, path: str, params: Mapping[str, str], headers: Mapping[str, str],
                   body: Any, endpoint: str) -> RawResponse:
        import aiohttp

        session = self._session or self._open()
        data = json.dumps(body).encode() if body is not None else None
        send_headers = {**headers, "Content-Type": "application/json"} if data is not None else headers
        try:
            async with session.request(method, path, params=params, headers=send_headers, data=data,
                                       allow_redirects=False) as response:
                content = await response.read()
                answer = RawResponse(response.status, {k.lower(): v for k, v in response.headers.items()}, content)
        except TimeoutError as exc:
            error: errors.APIConnectionError = errors.APITimeoutError(self._clean(f"timeout calling {path}: {exc!r}"),
                                                                      endpoint=endpoint)
            error.sent = not isinstance(exc, aiohttp.ConnectionTimeoutError)
            raise error from None
        except (aiohttp.ClientError, OSError) as exc:
            error = errors.APIConnectionError(self._clean(f"{type(exc).__name__} calling {path}: {exc}"), endpoint=endpoint)
            error.sent = not isinstance(exc, aiohttp.ClientConnectorError)
            raise error from None
        if log.isEnabledFor(logging.INFO):
            query = "&".join(f"{k}={v}" for k, v in params.items())
            log.info(self._clean(f'HTTP Request: {method} {self._settings.base_url}{path}?{query} "{answer.status}"'))
        return answer

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


def _proxy_for(base_url: str) -> str | None:
    """The environment's proxy (HTTPS_PROXY, HTTP_PROXY, NO_PROXY) for the service's base URL."""
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


class HttpxSession:
    """httpx's client, over its own pool or over a given transport (`httpx.MockTransport` in tests)."""

    def __init__(self, settings: Settings, clean: Clean, transport: httpx.AsyncBaseTransport | None = None) -> None:
        limits = httpx.Limits(max_connections=settings.max_connections,
                              max_keepalive_connections=settings.max_connections, keepalive_expiry=30.0)
        self._clean = clean
        self._client = httpx.AsyncClient(
            base_url=settings.base_url or "",
            timeout=settings.timeout,
            transport=transport or httpx.AsyncHTTPTransport(limits=limits, retries=0),
            headers={"User-Agent": settings.user_agent, "Accept": "application/json"},
            follow_redirects=False,
        )

    async def send(self, method: str, path: str, params: Mapping[str, str], headers: Mapping[str, str],
                   body: Any, endpoint: str) -> RawResponse:
        try:
            response = await self._client.request(method, path, params=params, headers=headers, json=body)
            content = response.content
        except httpx.TimeoutException as exc:
            error: errors.APIConnectionError = errors.APITimeoutError(
                self._clean(f"{type(exc).__name__} calling {path}: {exc}"), endpoint=endpoint)
            error.sent = not isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout))
            raise error from None
        except (httpx.HTTPError, OSError, TimeoutError) as exc:
            error = errors.APIConnectionError(self._clean(f"{type(exc).__name__} calling {path}: {exc}"), endpoint=endpoint)
            error.sent = not isinstance(exc, httpx.ConnectError)
            raise error from None
        return RawResponse(response.status_code, response.headers, content)

    async def aclose(self) -> None:
        await self._client.aclose()


class Http1Session:
    """HTTP/1.1 written and parsed here (connectors/http1.py): the default. Its pool is made on first use,
    inside the running loop."""

    def __init__(self, settings: Settings, clean: Clean) -> None:
        t = settings.timeout
        self._pool = http1.Pool(settings.base_url or "", limit=settings.max_connections, connect=t.connect,
                                pool=t.pool, read=t.read)
        self._base_url = settings.base_url
        self._clean = clean
        self._head = http1.fixed_headers(self._pool, settings.user_agent)
        self._quoted: dict[str, str] = {}  # query values encoded before

    async def send(self, method: str, path: str, params: Mapping[str, str], headers: Mapping[str, str],
                   body: Any, endpoint: str) -> RawResponse:
        target = f"{self._pool.prefix}{path}?{http1.query_string(params, self._quoted)}" if params else f"{self._pool.prefix}{path}"
        data = json.dumps(body).encode() if body is not None else None
        try:
            answer = await self._pool.send(http1.request_bytes(method, target, self._head, headers, data))
        except http1.SentError as failed:
            raise self._error(failed.error, path, endpoint, sent=True) from None
        except (OSError, TimeoutError) as exc:  # no connection: nothing reached the service
            raise self._error(exc, path, endpoint, sent=False) from None
        if log.isEnabledFor(logging.INFO):
            log.info(self._clean(f'HTTP Request: {method} {self._base_url}{target} "{answer.status}"'))
        return answer

    def _error(self, exc: BaseException, path: str, endpoint: str, *, sent: bool) -> errors.APIConnectionError:
        if isinstance(exc, TimeoutError):
            error: errors.APIConnectionError = errors.APITimeoutError(
                self._clean(f"timeout calling {path}: {exc or 'no connection in time'}"), endpoint=endpoint)
        else:
            error = errors.APIConnectionError(self._clean(f"{type(exc).__name__} calling {path}: {exc}"), endpoint=endpoint)
        error.sent = sent
        return error

    async def aclose(self) -> None:
        self._pool.close()


TRANSPORTS = ("http1", "aiohttp", "httpx")


def open_session(settings: Settings, clean: Clean, transport: httpx.AsyncBaseTransport | None = None) -> HttpSession:
    if transport is not None or settings.transport == "httpx":
        return HttpxSession(settings, clean, transport)
    # A proxy from the environment is aiohttp's to speak to (http1 connects to the service only).
    if settings.transport == "aiohttp" or (settings.transport == "http1" and _proxy_for(settings.base_url or "")):
        return AiohttpSession(settings, clean)
    if settings.transport == "http1":
        return Http1Session(settings, clean)
    raise ValueError(f"unknown transport {settings.transport!r}: use one of {', '.join(TRANSPORTS)}")
