"""What the client reports about every attempt it makes, so cost is visible upstream."""

from __future__ import annotations

import itertools
import os
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator


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
    call_id: str | None = None  # the id its `CallIntent` carried (None: a record made outside the client)
    # No answer came (a timeout, a dropped connection): the service may have billed it, so `units` is what
    # it may have cost by the spec's pricing, not what it did.
    unknown: bool = False


@dataclass(frozen=True)
class CallIntent:
    """An attempt about to be sent, told before it is: a ledger that writes it down first never loses a call
    the service billed while the process died waiting for the answer."""

    call_id: str  # the `CallRecord.call_id` of its outcome
    endpoint: str
    method: str
    path: str
    vin: str | None
    attempt: int
    units: int  # what it may cost by the spec's pricing (connectors/billing.py `estimate_units`)


CallObserver = Callable[[CallRecord], None]
CallSender = Callable[[CallIntent], None]


class UniqueHex:
    """32 hex digits, unique as a uuid4's are: 80 random bits per process, then a count.

    A uuid4 per call costs a system call for its randomness; this costs a format. A forked child
    (`--workers`) draws its own prefix, so two processes never share one.
    """

    def __init__(self) -> None:
        self._restart()
        os.register_at_fork(after_in_child=self._restart)

    def _restart(self) -> None:
        self._prefix, self._count = uuid.uuid4().hex[:20], itertools.count()

    def __next__(self) -> str:
        return f"{self._prefix}{next(self._count):012x}"

    def __iter__(self) -> Iterator[str]:
        return self


CALL_IDS = UniqueHex()  # `api_calls.call_id`: unique across runs and processes
