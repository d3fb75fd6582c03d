"""Counts of what the sandbox served, so tests can assert how many calls a flow made."""
from __future__ import annotations

import threading
from collections import Counter

DROPPED = 0  # status recorded for connections closed without an answer


class Stats:
    def __init__(self):
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str, int]] = Counter()

    def count(self, endpoint: str, key: str, status: int) -> None:
        with self._lock:
            self._counts[(endpoint, key, status)] += 1

    def requests(self) -> list[dict]:
        with self._lock:
            items = sorted(self._counts.items())
        return [{"endpoint": e, "key": k, "status": s, "count": n} for (e, k, s), n in items]

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
