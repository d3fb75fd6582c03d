"""Receiving the service's recalls-batch webhook, so a caller can wait instead of polling.

The payload is our design (README, "Where the spec is silent"): `{event, batchId, status, ...}`,
unsigned. The receiver listens on an open port (in production behind the HTTPS URL given to the
service as `webhookUrl`), so it trusts nothing it is sent:
- the URL given to the service carries a secret token made for this receiver (`notify_url`); a POST
  without it is refused before its body is read, compared in constant time;
- a body over `MAX_BODY_BYTES` is refused by its Content-Length, or by aiohttp while reading;
- the body must have the documented shape, for a batch this receiver was told to `expect`;
- a delivery only wakes the batch's waiter, at most once per `min_interval`; the waiter then reads
  the status from the service (a delivery is a hint, never a result), and the wake-up is reset;
- nothing is kept per refused POST or per unknown batch: memory is bounded whatever is posted;
- a malformed request (bad HTTP, oversize headers, junk) is one short line at most, `LOG_LINES_PER_SECOND`
  a second and then a count of those not logged (`_ServerLog`): aiohttp logs a traceback each, quoting
  up to 64 KB of the sender's bytes, and a flood of them wrote 116 MB to stderr in 40 s.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import secrets
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from .redact import guard_loggers, redact_text

log = logging.getLogger("connectors.webhooks")
PATH = "/recalls-batch"
TOKEN_PARAM = "token"
EVENT = "recalls_batch.completed"
MAX_BODY_BYTES = 16 * 1024  # the payload is a few hundred bytes
MAX_BATCH_ID = 200
_OPTIONAL_INTS = ("numericBatchId", "totalVins", "processedVins")
LOG_LINES_PER_SECOND = 5  # lines about malformed requests; the rest are counted, and said in one line
LOG_PREFIX_CHARS = 120  # of the error's text, escaped: enough to tell what was sent, never the whole


class _ServerLog(logging.Logger):
    """aiohttp's server logger for one receiver: each error a line without traceback, a few a second.

    aiohttp calls `exception`, `warning` and `debug` on it (its `RequestHandler(logger=...)`); every record
    comes here, to `_log`. Lines go to `connectors.webhooks`'s handlers; the run's token is redacted.
    """

    def __init__(self, token: str, refused: Counter[str], clock: Any = time.monotonic) -> None:
        super().__init__(f"{log.name}.server")
        self.parent = log
        self._token, self._refused, self._clock = token, refused, clock
        self._window, self._lines, self.unlogged = float("-inf"), 0, 0

    def _log(self, level: int, msg: object, args: Any, exc_info: Any = None, extra: Any = None,
             stack_info: bool = False, stacklevel: int = 1) -> None:
        error = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1] if exc_info else None
        self._refused["malformed"] += 1
        now = self._clock()
        if now - self._window >= 1.0:
            self.say_unlogged()
            self._window, self._lines = now, 0
        if self._lines >= LOG_LINES_PER_SECOND:
            self.unlogged += 1
            return
        self._lines += 1
        text = str(msg) % args if args else str(msg)
        if error is not None:
            text = f"{text}: {type(error).__name__}: {_escaped(str(error))}"
        if isinstance(error, HttpProcessingError):
            level = logging.WARNING  # the sender's fault, not ours: aiohttp says ERROR
        super()._log(level, "%s", (redact_text(text, (self._token,)),))

    def say_unlogged(self) -> None:
        if self.unlogged:
            count, self.unlogged = self.unlogged, 0
            super()._log(logging.WARNING, "%d more malformed requests not logged (at most %d lines a second)",
                         (count, LOG_LINES_PER_SECOND))


def _escaped(text: str) -> str:
    """A short, printable prefix of `text` (one line: control bytes and newlines escaped)."""
    cut = " ".join(text.split())[:LOG_PREFIX_CHARS]
    shown = cut.encode("unicode_escape").decode("ascii")
    return shown + ("…" if len(text) > LOG_PREFIX_CHARS else "")


@dataclass
class _Waiting:
    """One batch this run waits for: its wake-up and when it last woke its waiter."""

    event: asyncio.Event = field(default_factory=asyncio.Event)
    woke_at: float = float("-inf")


class BatchWebhookReceiver:
    """`async with BatchWebhookReceiver("127.0.0.1", 0) as hooks: hooks.expect(batch_id); await hooks.wait(batch_id, 60)`.

    Give the service `hooks.notify_url(public_url)`: the token is only in that URL.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, min_interval: float = 5.0) -> None:
        self.host, self.port = host, port
        self.min_interval = min_interval
        self._token = secrets.token_urlsafe(32)
        guard_loggers(self._token)  # a credential: redacted wherever the client's logs go
        self._waiting: dict[str, _Waiting] = {}
        self.received: deque[dict[str, str]] = deque(maxlen=32)  # the last accepted deliveries, summarised
        self.refused: Counter[str] = Counter()  # by reason, a fixed set of keys
        self._runner: web.AppRunner | None = None
        self._server_log = _ServerLog(self._token, self.refused)

    @property
    def url(self) -> str:
        """Where the receiver listens, without the token (safe to log and store)."""
        return f"http://{self.host}:{self.port}{PATH}"

    def notify_url(self, public_url: str | None = None) -> str:
        """The URL to give the service: `public_url` (or the local address) with this run's token."""
        parts = urlsplit(public_url or self.url)
        query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != TOKEN_PARAM]
        return urlunsplit(parts._replace(query=urlencode([*query, (TOKEN_PARAM, self._token)])))

    @property
    def waiting(self) -> set[str]:
        return set(self._waiting)

    def expect(self, batch_id: str) -> None:
        """Accept deliveries for `batch_id` from now on (call it as soon as the batch is submitted)."""
        self._waiting.setdefault(batch_id, _Waiting())

    def forget(self, batch_id: str) -> None:
        self._waiting.pop(batch_id, None)

    async def __aenter__(self) -> "BatchWebhookReceiver":
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post(PATH, self._receive)
        # No access log: it would show the token. aiohttp's errors go to a bounded log (`_ServerLog`).
        self._runner = web.AppRunner(app, access_log=None, logger=self._server_log)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]  # the bound port when 0 was asked
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        self._server_log.say_unlogged()

    async def _receive(self, request: web.Request) -> web.Response:
        given = request.query.get(TOKEN_PARAM, "")
        if not hmac.compare_digest(given.encode("utf-8", "replace"), self._token.encode()):
            return self._refuse("token", 403, "forbidden")
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return self._refuse("size", 413, "body too large")
        try:
            body = await request.read()  # chunked bodies are capped by client_max_size
        except web.HTTPRequestEntityTooLarge:
            return self._refuse("size", 413, "body too large")
        delivery = _parse(body)
        if delivery is None:
            return self._refuse("shape", 400, "expected the recalls_batch.completed payload")
        batch_id, status = delivery
        waiting = self._waiting.get(batch_id)
        if waiting is None:
            return self._refuse("batch", 404, "no such batch is awaited")
        self.received.append({"batchId": batch_id, "status": status})
        log.debug("webhook for an awaited batch: %s", status)
        waiting.event.set()
        return web.Response(status=204)

    def _refuse(self, reason: str, status: int, text: str) -> web.Response:
        self.refused[reason] += 1  # counted, never logged one by one: a flood must not flood stderr
        return web.Response(status=status, text=text)

    async def wait(self, batch_id: str, timeout: float) -> bool:
        """True when a delivery for the batch arrived (now or since the last wake-up), False after `timeout`.

        At most one True per `min_interval`: repeats within it are merged into the next wake-up.
        """
        self.expect(batch_id)
        waiting = self._waiting[batch_id]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            await asyncio.wait_for(waiting.event.wait(), timeout)
        except TimeoutError:
            return False
        pause = waiting.woke_at + self.min_interval - loop.time()
        if pause > 0:
            if loop.time() + pause > deadline:
                await asyncio.sleep(max(0.0, deadline - loop.time()))
                return False  # the caller's own fallback read comes first; the wake-up stays set
            await asyncio.sleep(pause)
        waiting.event.clear()
        waiting.woke_at = loop.time()
        return True


def _parse(body: bytes) -> tuple[str, str] | None:
    """(batchId, status) of a well-formed delivery, else None."""
    try:
        payload: Any = json.loads(body)
    except ValueError:
        return None
    if not isinstance(payload, dict) or payload.get("event") != EVENT:
        return None
    batch_id, status = payload.get("batchId"), payload.get("status")
    if not (isinstance(batch_id, str) and 0 < len(batch_id) <= MAX_BATCH_ID):
        return None
    if not (isinstance(status, str) and 0 < len(status) <= 32):
        return None
    for name in _OPTIONAL_INTS:
        value = payload.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            return None
    if not isinstance(payload.get("completedAt", ""), (str, type(None))):
        return None
    return batch_id, status
