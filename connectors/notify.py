"""Posting a message to a webhook (a Slack incoming webhook, or any JSON receiver), with bounded retries.

Knows nothing of Prefect, DuckDB or what the message says. A webhook URL's path is often its
credential (Slack's is), so only its scheme, host and port are ever reported; the message is sent
through `redact_text` with the caller's secrets, so an API key never leaves even by mistake.

Every wait has a deadline: httpx's timeouts bound each read, not an answer, so a receiver that
trickles one byte every few seconds would hold the caller for ever. Each attempt is therefore bounded
as a whole (`PostRetries.attempt_seconds`: connect, send and the answer's last byte), and all attempts
with the waits between them too (`total_seconds`). The caller's `stop` (a run's SIGTERM) ends it
within `POLL` seconds.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from .redact import redact_text

# Worth another try: the receiver was busy, rate-limited us or failed on its side.
RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
TIMEOUT = httpx.Timeout(10.0, connect=5.0)
POLL = 0.25  # seconds: how often a post looks at the caller's `stop`


class NotifyError(ValueError):
    """A webhook URL that cannot take a post; the message says why, in one line."""


@dataclass(frozen=True)
class Delivery:
    sent: bool
    attempts: int
    status: int | None  # the last answer's HTTP status; None when none came
    error: str | None
    target: str  # scheme://host[:port], never the path or query

    def to_dict(self) -> dict[str, Any]:
        return {"sent": self.sent, "attempts": self.attempts, "status": self.status, "error": self.error,
                "target": self.target}


def validate_url(url: str) -> str:
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NotifyError(f"{target_of(url) or 'the URL'} is not an http(s) URL with a host; "
                          "give the webhook's full URL, e.g. https://hooks.slack.com/services/...")
    return url


def target_of(url: str) -> str:
    parts = urlsplit(url or "")
    if not parts.scheme or not parts.hostname:
        return ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


@dataclass(frozen=True)
class PostRetries:
    """Tries in all, the first wait between two (doubled each time, jittered), the longest wait."""

    attempts: int = 4
    backoff: float = 0.5
    max_wait: float = 10.0
    attempt_seconds: float = 15.0  # one attempt as a whole: connect, send, the answer's last byte
    total_seconds: float = 45.0  # every attempt and every wait between them


def _never() -> bool:
    return False


def post_json(
    url: str,
    message: dict[str, Any],
    *,
    retries: PostRetries = PostRetries(),  # noqa: B008 - frozen: one shared default is safe
    idempotency_key: str | None = None,
    secrets: tuple[str, ...] = (),
    timeout: httpx.Timeout = TIMEOUT,
    sleep: Callable[[float], None] | None = None,
    stop: Callable[[], bool] = _never,
) -> Delivery:
    """POST `message` as JSON; retry a transient failure up to `retries.attempts` tries in all.

    Waits `backoff` x 2^n seconds (jittered) between tries, or the receiver's Retry-After, never
    more than `max_wait`. Any other 4xx is not retried. Each attempt ends after `attempt_seconds`, the
    whole after `total_seconds`, and both as soon as `stop()` is true (see the module docstring). Never
    raises for a failed delivery: the caller decides what a failed notification means (a refresh
    does not fail for one). `sleep`: tests record the waits instead of waiting.
    """
    validate_url(url)
    body = redact_text(json.dumps(message, default=str), secrets).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "fleet-data/0.1"}
    if idempotency_key:
        headers["Idempotency-Key"] = idempotency_key  # the same on every attempt: a receiver may drop repeats
    post = _Post(url, body, headers, retries, timeout, sleep)
    if not _run(_until_stopped(post.deliver(), stop)):
        return post.outcome(f"stopped after {post.attempts} attempt(s): the run was asked to stop")
    return post.outcome(None)


class _Post:
    """One message's attempts; what the last one got, so a deadline or a stop can report it."""

    def __init__(self, url: str, body: bytes, headers: dict[str, str], retries: PostRetries,
                 timeout: httpx.Timeout, sleep: Callable[[float], None] | None) -> None:
        self.url, self.body, self.headers, self.retries = url, body, headers, retries
        self.timeout, self.sleep = timeout, sleep
        self.attempts = 0
        self.status: int | None = None
        self.error = ""
        self.delivered: Delivery | None = None

    def outcome(self, stopped: str | None) -> Delivery:
        if self.delivered is not None:
            return self.delivered
        target = target_of(self.url)
        return Delivery(False, self.attempts, self.status, stopped or self.error or "not sent", target)

    async def deliver(self) -> None:
        retries, target = self.retries, target_of(self.url)
        deadline = time.monotonic() + retries.total_seconds
        async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
            for attempt in range(1, max(retries.attempts, 1) + 1):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.attempts = attempt
                wait = min(retries.max_wait, retries.backoff * 2 ** (attempt - 1) * random.uniform(0.8, 1.2))
                try:
                    async with asyncio.timeout(min(retries.attempt_seconds, left)):
                        answer = await client.post(self.url, content=self.body, headers=self.headers)
                except TimeoutError:
                    self.status, self.error = None, f"no whole answer within {min(retries.attempt_seconds, left):.1f}s"
                except httpx.HTTPError as exc:
                    self.status, self.error = None, type(exc).__name__  # the exception's text would name the URL
                else:
                    self.status = answer.status_code
                    if self.status < 300:
                        self.delivered = Delivery(True, attempt, self.status, None, target)
                        return
                    if self.status not in RETRYABLE_STATUSES:
                        self.delivered = Delivery(False, attempt, self.status, f"HTTP {self.status} (not retried)", target)
                        return
                    self.error = f"HTTP {self.status}"
                    wait = _retry_after(answer, retries.max_wait) or wait
                if attempt < retries.attempts:
                    await self._wait(min(wait, max(0.0, deadline - time.monotonic())))
        late = time.monotonic() >= deadline
        self.error = f"{self.error} after {self.attempts} attempts" + (
            f", at the {retries.total_seconds:g}s deadline" if late else "")

    async def _wait(self, seconds: float) -> None:
        if self.sleep is not None:
            self.sleep(seconds)
        else:
            await asyncio.sleep(seconds)


async def _until_stopped(work: Coroutine[Any, Any, None], stop: Callable[[], bool]) -> bool:
    """Run `work` until it ends (True) or `stop()` is true (False: `work` cancelled), looking every POLL s."""
    task = asyncio.ensure_future(work)
    while not task.done():
        if stop():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)  # let the client close its connection
            return False
        await asyncio.wait({task}, timeout=POLL)
    task.result()
    return True


def _run(work: Coroutine[Any, Any, bool]) -> bool:
    """`asyncio.run(work)`, in a thread of its own when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(asyncio.run(work)), name="notify", daemon=True)
    thread.start()
    thread.join()
    return result[0] if result else False


def _retry_after(answer: httpx.Response, max_wait: float) -> float | None:
    try:
        return min(max_wait, max(0.0, float(answer.headers.get("Retry-After", ""))))
    except ValueError:
        return None
