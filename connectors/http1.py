"""HTTP/1.1 to the service over asyncio's own sockets, parsed by httptools: the default transport.

Why not aiohttp here. A call to one known host needs a connection from a pool, a request line and a
few fixed headers written in one `write`, and an answer parsed in C. aiohttp's client builds a URL,
a header multidict, a request and a response object, a stream reader and two timers per call: on
this machine that was most of the client's CPU per call (docs/benchmarks.md, "A client nearer the
bare loop"), more than the rest of the pipeline's work per call put together. This module does the
little a call needs and nothing else; aiohttp stays for what it does and this does not (a proxy from
the environment: `transport.open_session` picks it then), httpx for tests that script answers.

What it keeps from the aiohttp session it replaces (connectors/transport.py `AiohttpSession`):
- split timeouts: `connect` to open a connection, `pool` for getting one (waiting for a free one
  included, as aiohttp's `connect`), `read` between two reads of an answer once the request is sent;
- at most `max_connections` open, idle ones kept 30 s, LIFO (the warmest first);
- no attempt of its own: a request is written once; a connection that dies under it is an error
  the retry policy decides about (aiohttp#10790 is why aiohttp's own resend is switched off there);
- `sent` on every connection error: False only when nothing can have reached the service;
- gzip and deflate answers decoded, any length framing (Content-Length, chunked, until close);
  `Connection: close` and HTTP/1.0 answers close the connection after the answer.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections import deque
from typing import Mapping
from urllib.parse import quote, urlsplit

import httptools

KEEPALIVE_SECONDS = 30.0  # an idle connection older than this is closed, not reused (as aiohttp's keepalive_timeout)
_SAFE = "-._~"  # unreserved characters (RFC 3986) stay as they are in a query value
_NO_BODY = frozenset({204, 304})


class ConnectionDropped(ConnectionError):
    """The connection closed before the answer was whole (the service or the network dropped it)."""


class MalformedHTTP(ConnectionError):
    """The bytes that came back are not an HTTP/1.1 answer."""


class Response:
    """What came back: status, headers (lower-case names), content (decoded if the service compressed it)."""

    __slots__ = ("status", "headers", "content")

    def __init__(self, status: int, headers: Mapping[str, str], content: bytes) -> None:
        self.status, self.headers, self.content = status, headers, content


class _Connection(asyncio.Protocol):
    """One kept-alive connection: one request at a time, its answer collected whole into a future."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._future: asyncio.Future[Response] | None = None
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._framed = False  # the answer says where it ends (Content-Length, chunked, or a status without body)
        self._complete = False
        self._headers_done = False
        self.last_read = 0.0  # when bytes last came, or the request went out (the read timeout counts from it)
        self.closed = False
        self.idle_since = 0.0

    # -- asyncio's side --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.last_read = self._loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(MalformedHTTP("the service answered with a protocol upgrade"))
        except httptools.HttpParserError as exc:
            self._fail(MalformedHTTP(f"the answer is not valid HTTP/1.1 ({exc})"))

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        future = self._future
        if future is not None and not future.done():
            if self._headers_done and not self._framed and not self._complete:
                self._finish()  # an answer that ends where the connection does (no length given)
            else:
                self._fail(ConnectionDropped("the connection closed before the answer was whole"))

    # -- httptools' callbacks --------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._headers, self._body, self._framed, self._complete = {}, [], False, False
        self._headers_done = False

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        self._headers[key] = value.decode("latin-1")
        if key == "content-length" or key == "transfer-encoding":
            self._framed = True

    def on_headers_complete(self) -> None:
        self._headers_done = True
        if self._parser.get_status_code() in _NO_BODY:
            self._framed = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._complete = True
        self._finish()

    # -- the call's side -------------------------------------------------------------------------
    def request(self, data: bytes) -> asyncio.Future[Response]:
        """Write one request; the future is its whole answer."""
        assert self._transport is not None
        self._future = future = self._loop.create_future()
        self._headers_done = False
        self.last_read = self._loop.time()
        self._transport.write(data)
        return future

    def waiting(self) -> asyncio.Future[Response] | None:
        """The answer owed on this connection, if one is."""
        future = self._future
        return future if future is not None and not future.done() else None

    def time_out(self, future: asyncio.Future[Response], read: float, turns: int = 2) -> None:
        """Silent for `read` seconds: a timeout, if a poll of the sockets later still nothing came. uvloop runs
        due timers before it reads the sockets, so a process starved of CPU must not call a timeout on bytes
        already waiting (two turns: after the next poll on either loop)."""
        if self._future is not future or future.done():
            return
        if turns:
            self._loop.call_soon(self.time_out, future, read, turns - 1)
        elif self._loop.time() >= self.last_read + read:
            self._fail(TimeoutError(f"no answer for {read:g} s"))

    def _finish(self) -> None:
        future, self._future = self._future, None
        body = b"".join(self._body) if len(self._body) != 1 else self._body[0]
        headers, self._body = self._headers, []
        if not self._parser.should_keep_alive() or not self._complete:
            self.close()
        if future is None or future.done():
            return
        encoding = headers.get("content-encoding")
        if encoding and body:
            try:
                body = _decode(encoding, body)
            except zlib.error as exc:
                future.set_exception(MalformedHTTP(f"the answer's {encoding} body does not decode ({exc})"))
                return
        future.set_result(Response(self._parser.get_status_code(), headers, body))

    def _fail(self, error: BaseException) -> None:
        future, self._future = self._future, None
        self.close()
        if future is not None and not future.done():
            future.set_exception(error)

    def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()


def _decode(encoding: str, body: bytes) -> bytes:
    """A gzip or deflate body decoded (deflate as zlib-wrapped or raw, as servers send both); else as it came."""
    encoding = encoding.strip().lower()
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompress(body, 16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -zlib.MAX_WBITS)
    return body


_TLS: list[ssl.SSLContext] = []


def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context per process: loading the system's certificates costs milliseconds."""
    if not _TLS:
        _TLS.append(ssl.create_default_context())
    return _TLS[0]


class Pool:
    """Connections to one origin: at most `limit` open, idle ones reused warmest first."""

    def __init__(self, base_url: str, *, limit: int, connect: float | None, pool: float | None,
                 read: float | None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {parts.scheme}://{parts.hostname or ''}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.authority = parts.netloc.rpartition("@")[2]  # the Host header: no user info
        self.prefix = parts.path.rstrip("/")
        self.limit = max(1, limit)
        self._connect, self._pool = connect, pool
        self._read = read
        # The read timeout: one sweep over the connections owing an answer, every quarter of it (at most a
        # second): a timer per request cost a twentieth of a call's CPU. It fires `read` to `read` + a quarter
        # (or + 1 s) after the last bytes, as aiohttp rounds its timeouts up to the second too.
        self._sweep_every = min(read / 4, 1.0) if read is not None else None
        self._sweep: asyncio.TimerHandle | None = None
        self._busy: set[_Connection] = set()
        self._idle: list[_Connection] = []
        self._open = 0  # open or being opened
        self._waiters: deque[asyncio.Future[_Connection | None]] = deque()
        self._ssl = _tls_context() if self.https else None
        self._closed = False

    async def acquire(self) -> _Connection:
        """A connection to send one request on: an idle one, a new one, or the first one freed."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < KEEPALIVE_SECONDS:
                return conn
            self._discard(conn)
        if self._pool is None:
            return await self._obtain(loop)
        async with asyncio.timeout(self._pool):
            return await self._obtain(loop)

    async def _obtain(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        while self._open >= self.limit:
            if self._closed:
                raise ConnectionDropped("the client was closed")
            waiter: asyncio.Future[_Connection | None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                handed = await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled() and waiter.result() is not None:
                    self.release(waiter.result())  # type: ignore[arg-type]  # handed over as we gave up
                elif waiter in self._waiters:
                    self._waiters.remove(waiter)
                raise
            if handed is not None:
                return handed
        self._open += 1
        try:
            return await self._dial(loop)
        except BaseException:
            self._open -= 1
            self._wake()
            raise

    async def _dial(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        made = loop.create_connection(lambda: _Connection(loop), self.host, self.port, ssl=self._ssl,
                                      server_hostname=self.host if self._ssl else None)
        if self._connect is None:
            _, conn = await made
        else:
            async with asyncio.timeout(self._connect):
                _, conn = await made
        return conn

    async def send(self, data: bytes) -> Response:
        """Write one request on a pooled connection and wait for its whole answer.

        Raises OSError or TimeoutError when nothing was written (nothing can have reached the service),
        `SentError` with the cause when it failed after (the service may have received it).
        """
        conn = await self.acquire()
        self._busy.add(conn)
        if self._sweep is None and self._sweep_every is not None:
            self._sweep = asyncio.get_running_loop().call_later(self._sweep_every, self._check_reads)
        try:
            answer = await conn.request(data)
        except Exception as exc:
            conn.close()  # an answer still owed on it, or a broken one: never reused
            self._discard(conn)
            raise SentError(exc) from None
        except BaseException:  # cancelled while waiting for the answer
            conn.close()
            self._discard(conn)
            raise
        finally:
            self._busy.discard(conn)
        self.release(conn)
        return answer

    def _check_reads(self) -> None:
        """The sweep: each connection silent for `read` seconds times out; again while any owes an answer."""
        self._sweep = None
        if not self._busy or self._read is None or self._sweep_every is None:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        for conn in self._busy:
            future = conn.waiting()
            if future is not None and now >= conn.last_read + self._read:
                conn.time_out(future, self._read)
        self._sweep = loop.call_later(self._sweep_every, self._check_reads)

    def release(self, conn: _Connection) -> None:
        """The request on `conn` is over: the connection goes to a waiter or the idle list, or is closed."""
        if conn.closed or self._closed:
            self._discard(conn)
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        conn.idle_since = asyncio.get_running_loop().time()
        self._idle.append(conn)

    def _discard(self, conn: _Connection) -> None:
        conn.close()
        self._open -= 1
        self._wake()

    def _wake(self) -> None:
        """A connection slot is free: the first waiter opens a connection of its own."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for conn in self._idle:
            conn.close()
        self._idle.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(ConnectionDropped("the client was closed"))


def query_string(params: Mapping[str, str], quoted: dict[str, str]) -> str:
    """`a=1&b=2`, each value percent-encoded (a space as %20), names as they are (ours are plain words).

    `quoted`: the caller's memo of values encoded before (the key, a state, a condition come back on
    every call); kept small."""
    parts = []
    for name, value in params.items():
        if not (value.isalnum() and value.isascii()):
            encoded = quoted.get(value)
            if encoded is None:
                if len(quoted) >= 256:
                    quoted.clear()
                encoded = quoted[value] = quote(value, safe=_SAFE)
            value = encoded
        parts.append(f"{name}={value}")
    return "&".join(parts)


def request_bytes(method: str, target: str, head: bytes, headers: Mapping[str, str], body: bytes | None) -> bytes:
    """The request as written: its line, the fixed headers (`head`), the call's own, the body."""
    lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    if body is None:
        return f"{method} {target} HTTP/1.1\r\n".encode() + head + lines.encode() + b"\r\n"
    return (f"{method} {target} HTTP/1.1\r\n".encode() + head + lines.encode()
            + f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)


def fixed_headers(pool: Pool, user_agent: str) -> bytes:
    """The headers every request carries, encoded once per client."""
    return (f"Host: {pool.authority}\r\nUser-Agent: {user_agent}\r\nAccept: application/json\r\n"
            "Accept-Encoding: gzip, deflate\r\n").encode("latin-1")


class SentError(Exception):
    """A failure after the request was written: the service may have received it (and billed it)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error
