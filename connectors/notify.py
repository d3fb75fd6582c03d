"""Posting a message to a webhook (a Slack incoming webhook, or any JSON receiver), with bounded retries.

Knows nothing of Prefect, DuckDB or what the message says. A webhook URL's path is often its
credential (Slack's is), so only its scheme, host and port are ever reported; the message is sent
through `redact_text` with the caller's secrets, so an API key never leaves even by mistake.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from .redact import redact_text

# Worth another try: the receiver was busy, rate-limited us or failed on its side.
RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
TIMEOUT = httpx.Timeout(10.0, connect=5.0)


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


def post_json(
    url: str,
    message: dict[str, Any],
    *,
    retries: PostRetries = PostRetries(),  # noqa: B008 - frozen: one shared default is safe
    idempotency_key: str | None = None,
    secrets: tuple[str, ...] = (),
    timeout: httpx.Timeout = TIMEOUT,
    sleep: Callable[[float], None] = time.sleep,
) -> Delivery:
    """POST `message` as JSON; retry a transient failure up to `retries.attempts` tries in all.

    Waits `backoff` x 2^n seconds (jittered) between tries, or the receiver's Retry-After, never
    more than `max_wait`. Any other 4xx is not retried. Never raises for a failed delivery: the
    caller decides what a failed notification means (a refresh does not fail for one).
    """
    validate_url(url)
    attempts, backoff, max_wait = retries.attempts, retries.backoff, retries.max_wait
    body = redact_text(json.dumps(message, default=str), secrets).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "fleet-data/0.1"}
    if idempotency_key:
        headers["Idempotency-Key"] = idempotency_key  # the same on every attempt: a receiver may drop repeats
    target = target_of(url)
    status: int | None = None
    error = ""
    with httpx.Client(timeout=timeout, follow_redirects=False) as client:
        for attempt in range(1, max(attempts, 1) + 1):
            wait = min(max_wait, backoff * 2 ** (attempt - 1) * random.uniform(0.8, 1.2))
            try:
                answer = client.post(url, content=body, headers=headers)
            except httpx.HTTPError as exc:
                status, error = None, type(exc).__name__  # the exception's text would name the URL
            else:
                status = answer.status_code
                if status < 300:
                    return Delivery(True, attempt, status, None, target)
                if status not in RETRYABLE_STATUSES:
                    return Delivery(False, attempt, status, f"HTTP {status} (not retried)", target)
                error = f"HTTP {status}"
                wait = _retry_after(answer, max_wait) or wait
            if attempt < attempts:
                sleep(wait)
    return Delivery(False, max(attempts, 1), status, f"{error} after {max(attempts, 1)} attempts", target)


def _retry_after(answer: httpx.Response, max_wait: float) -> float | None:
    try:
        return min(max_wait, max(0.0, float(answer.headers.get("Retry-After", ""))))
    except ValueError:
        return None
