"""Counts of what the sandbox served, so tests can assert how many calls a flow made.

Beyond the counts: the peak number of calls in flight at once (benchmarks use it to show that
contenders ran at the same concurrency) and, when switched on, a journal of every call in the
order its answer was finished (reliability tests use it to prove that no call followed a
non-retryable answer; a call that hangs is journalled when the sandbox gives up on it).
"""
from __future__ import annotations

import threading
from collections import Counter

DROPPED = 0  # status recorded for connections closed without an answer


class Stats:
    def __init__(self, journal: bool = False):
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str, int]] = Counter()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.journal_on = journal
        self._journal: list[tuple[str, str, str, int, str, str]] = []

    def started(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def count(self, endpoint: str, key: str, status: int, vin: str = "", target: str = "", idempotency_key: str = "") -> None:
        """`target`: what a call without a VIN was about (a batch id, a plate), for the journal."""
        with self._lock:
            self.in_flight -= 1
            self._counts[(endpoint, key, status)] += 1
            if self.journal_on:
                self._journal.append((endpoint, key, vin, status, target, idempotency_key))

    def requests(self) -> list[dict]:
        with self._lock:
            items = sorted(self._counts.items())
        return [{"endpoint": e, "key": k, "status": s, "count": n} for (e, k, s), n in items]

    def journal(self) -> list[dict]:
        with self._lock:
            entries = list(self._journal)
        return [{"endpoint": e, "key": k, "vin": v, "status": s, "target": t, "idempotency_key": i}
                for e, k, v, s, t, i in entries]

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._journal.clear()
            self.peak_in_flight = self.in_flight
