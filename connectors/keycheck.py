"""One free call that says whether the service takes the key, before a run starts anything costly.

`GET /specs` with the key and no VIN. The service checks the key before the parameters (spec, "Errors" and
"Usage": a request failing validation, 400, consumes no quota), so a usable key is answered 400 `Missing vin`,
free, and a refused one 401 (missing, unknown or inactive), 403 blocked or 402 out of credits: refusals of
the key, which no call of the run could get past (tasks/control/stops.py stops every endpoint on them).
Anything else (a 5xx, a 429, no answer, a 200 from a service that validates later) is no verdict: the run
goes ahead and its own calls meet whatever it was, as they would have without this check.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

import httpx

from . import errors as e
from .config import DEFAULT_TIMEOUT, Settings
from .redact import guard_loggers, redact_echo, redact_text

PATH = "/specs"
KEY_ACCEPTED = "KeyAccepted"  # the ledger's `error_message` for a check the key passed: its 400 is no failed call
_KEY_REFUSALS = (e.AuthenticationError, e.KeyBlockedError, e.InsufficientCreditsError)


@dataclass(frozen=True)
class KeyCheck:
    """What the check's one call got: its status (None: no answer) and, when the key was refused, why."""

    call_id: str
    status: int | None
    refused: str | None  # "401 User with this API key was not found ..." (as a run's stop reason says it)
    error: str | None  # as the call ledger names errors (the class: AuthenticationError), or KEY_ACCEPTED; no key
    latency_ms: float
    fetched_at: datetime


def check_key(settings: Settings) -> KeyCheck:
    """Ask once; a refusal of the key is in `refused`. Never raises for what the service or the network did."""
    guard_loggers(settings.api_key)  # the command's first call: httpx logs its request line, `?key=` and all
    url = (settings.base_url or "").rstrip("/") + PATH
    started, at = time.perf_counter(), datetime.now(timezone.utc)
    timeout = httpx.Timeout(connect=DEFAULT_TIMEOUT.connect, read=10.0, write=10.0, pool=10.0)
    status: int | None = None
    refused = error = None
    try:
        with httpx.Client(timeout=timeout, headers={"User-Agent": settings.user_agent}) as client:
            answer = client.get(url, params={"key": settings.api_key or ""})
        status = answer.status_code
        if status >= 400:
            try:
                body = redact_echo(answer.json())
            except ValueError:
                body = None
            refusal = e.error_from_response(status, body if isinstance(body, dict) else None, endpoint=PATH)
            error = KEY_ACCEPTED if isinstance(refusal, e.InvalidRequestError) else type(refusal).__name__
            if isinstance(refusal, _KEY_REFUSALS):
                refused = f"{status} {redact_text(refusal.message, (settings.api_key or '',))}"
    except httpx.HTTPError as exc:
        error = type(exc).__name__  # no answer: the request may never have left (nothing to bill: it names no VIN)
    return KeyCheck(uuid.uuid4().hex, status, refused, error, (time.perf_counter() - started) * 1000, at)
