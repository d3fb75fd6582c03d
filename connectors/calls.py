"""What the client reports about every attempt it makes, so cost is visible upstream."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class CallRecord:
    endpoint: str  # the endpoint's name in ENDPOINTS
    method: str
    path: str
    vin: str | None
    status: int | None  # None: no HTTP answer (timeout, dropped connection)
    attempt: int  # 1 for the first try
    latency_ms: float
    units: int  # what this attempt cost by the spec's billing rules
    error: str | None  # exception class name when the attempt failed
    will_retry: bool
    replayed: bool = False  # the service answered from an earlier request's idempotency key: billed 0


CallObserver = Callable[[CallRecord], None]
