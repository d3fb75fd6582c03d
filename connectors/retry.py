"""The retry policy, in one place, as the spec's Errors section states it.

- 502/503/504, connection errors, timeouts and malformed bodies: retried with
  exponential backoff and full jitter, honouring `Retry-After` up to a cap.
- 500: retried once; CV-001/CV-002 provider-authentication failures never.
- 400/401/402/403/404/405/409/429: never.
- A POST is retried only when it carries an idempotency key. The client sends one on
  every call (GET too), the same on each attempt, so a retry, after a 503
  `auto_recharge_pending` above all, can never start a second batch or payment.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Mapping

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
    max_retries: int = 4  # transient failures (5xx upstream, network): attempts = 1 + max_retries
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
