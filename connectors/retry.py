"""The retry policy, in one place, as the spec's Errors section states it.

- 502/503/504, connection errors, timeouts and malformed bodies: retried with
  exponential backoff and full jitter, honouring `Retry-After` up to a cap.
- 500: retried once; CV-001/CV-002 provider-authentication failures never.
- 400/401/402/403/404/405/409/429: never.
- A POST is retried only when it carries an idempotency key. The client sends one on
  every call (GET too), the same on each attempt, so a retry, after a 503
  `auto_recharge_pending` above all, can never start a second batch or payment.

Where the wait happens. Alone, a call waits out its backoff or `Retry-After` in place. Run by a
scheduler (tasks/fetch/scheduler.py) inside `scheduled(attempts)`, it does not: a retryable failure
raises `RetryLater` with the wait, and the scheduler queues the call until then while its slot
serves other calls. `CallAttempts` carries what makes the next attempt the same call: its
Idempotency-Key, the attempts made, the retries spent per budget (so the maximum holds).
A wait in place can be ended early, one way: inside `waits_end_when(check)`, the client looks at
`check()` every `WAIT_STEP` seconds and gives up with `RetryAbandoned` once it names a reason (a stop,
the run's retry window closing). The client's `interrupt=` is the same check for all its calls.
"""

from __future__ import annotations

import random
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Callable, Iterator, Mapping

from .errors import (
    APIConnectionError,
    InternalServerError,
    MalformedResponseError,
    ProviderAuthenticationError,
    UpstreamError,
    VehicleDataError,
)


@dataclass(frozen=True)
class RetryPolicy:
    # Transient failures (5xx upstream, network): attempts = 1 + max_retries. Three, so that a call answered
    # 503 `Retry-After: 60` every time spends them within the run's 3-minute retry window (tasks/control/retry_window.py)
    # and ends failed with the service's reason, not pending run after run.
    max_retries: int = 3
    max_500_retries: int = 1  # the spec: "500: once with backoff"
    initial_backoff: float = 0.5
    max_backoff: float = 30.0
    max_retry_after: float = 60.0  # cap on a server-sent Retry-After
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def should_retry(
        self, error: VehicleDataError, *, retries: Mapping[str, int], method: str, idempotent: bool
    ) -> bool:
        """Whether to try again after `error`, given the retries already spent per budget."""
        budget = self.budget(error)
        if budget is None:
            return False
        if method.upper() != "GET" and not idempotent:
            return False
        limit = self.max_500_retries if budget == "server_error" else self.max_retries
        return retries.get(budget, 0) < limit

    @staticmethod
    def budget(error: VehicleDataError) -> str | None:
        """Which retry budget an error draws on; None: never retried."""
        if isinstance(error, ProviderAuthenticationError):
            return None
        if isinstance(error, InternalServerError):
            return "server_error"
        if isinstance(error, (UpstreamError, APIConnectionError, MalformedResponseError)):
            return "transient"
        return None

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before attempt `attempt + 1`."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_retry_after)
        ceiling = min(self.max_backoff, self.initial_backoff * (2 ** (attempt - 1)))
        # Full jitter keeps thousands of concurrent callers from retrying in lockstep.
        return self.rng.uniform(ceiling / 2, ceiling)


def parse_retry_after(value: str | None) -> float | None:
    """`Retry-After` in seconds, from either delta-seconds or an HTTP date; garbage is absent."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
        return max(seconds, 0.0)
    return seconds if seconds >= 0 else None


# --- waiting outside the client: a scheduler's queue, or a wait that a stop ends ----------------------

WAIT_STEP = 0.25  # seconds between two looks at a stop while waiting in place


@dataclass
class CallAttempts:
    """One call's attempts, kept between them while the call waits in a scheduler's queue."""

    idempotency_key: str | None = None
    attempts: int = 0
    retries: dict[str, int] = field(default_factory=dict)


class RetryLater(Exception):
    """A retryable failure of a scheduled call: ask again in `delay` seconds, with the same `CallAttempts`.

    Not a `VehicleDataError`, so no handler of failures takes it for one.
    """

    def __init__(self, error: VehicleDataError, delay: float) -> None:
        super().__init__(f"retry in {delay:.2f}s after {type(error).__name__}")
        self.error, self.delay = error, delay


class RetryAbandoned(Exception):
    """A wait in place ended by a stop: `reason` is the stop's, `error` the failure that was waited out."""

    def __init__(self, reason: str, error: VehicleDataError) -> None:
        super().__init__(reason)
        self.reason, self.error = reason, error


_scheduled: ContextVar[CallAttempts | None] = ContextVar("scheduled_call", default=None)
_stop_check: ContextVar[Callable[[], str | None] | None] = ContextVar("retry_stop_check", default=None)


class scheduled:  # noqa: N801 - a context manager named for what it says, as contextlib's are
    """The request made inside is one attempt of the call `attempts` tracks; its retries are the caller's.

    A class, not a generator-based `contextmanager`: a scheduler enters one per attempt."""

    __slots__ = ("_attempts", "_token")

    def __init__(self, attempts: CallAttempts) -> None:
        self._attempts = attempts

    def __enter__(self) -> CallAttempts:
        self._token = _scheduled.set(self._attempts)
        return self._attempts

    def __exit__(self, *exc: object) -> None:
        _scheduled.reset(self._token)


def scheduled_call() -> CallAttempts | None:
    return _scheduled.get()


@contextmanager
def waits_end_when(check: Callable[[], str | None]) -> Iterator[None]:
    """Retry waits inside end with `RetryAbandoned` as soon as `check()` returns a reason."""
    token = _stop_check.set(check)
    try:
        yield
    finally:
        _stop_check.reset(token)


def stop_check() -> Callable[[], str | None] | None:
    return _stop_check.get()
