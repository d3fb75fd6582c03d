"""Fetch turns: one chunk per dataset calls the service at a time, while the chunk before it lands.

A chunk task fetches, then lands. Run one after another, the service sits idle while each chunk
lands; run two at once, calls in flight would double past `--concurrency`. So two chunks of a
dataset run side by side but take turns to fetch: the second fetches while the first lands, and
`concurrency` stays the most calls in flight per dataset.

Taking turns also keeps stops exact: a chunk only fetches once the chunk before it has finished
fetching, so when that chunk hit the quota (or ran out of credits), the next one sees the stop
here and calls nothing. State is per process and per run; chunk tasks run in this process's threads.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

_guard = threading.Lock()
_turns: dict[tuple[str, str], threading.Lock] = {}
_stops: dict[tuple[str, str], str] = {}


class Turn:
    def __init__(self, key: tuple[str, str]) -> None:
        self._key = key

    @property
    def stop_reason(self) -> str | None:
        """Why an earlier chunk of this dataset stopped calling in this run, if it did."""
        with _guard:
            return _stops.get(self._key)

    def stop(self, reason: str) -> None:
        with _guard:
            _stops.setdefault(self._key, reason)


@contextmanager
def fetch_turn(run_id: str, dataset: str) -> Iterator[Turn]:
    """Hold `dataset`'s turn to call the service for the length of the block."""
    key = (run_id, dataset)
    with _guard:
        lock = _turns.setdefault(key, threading.Lock())
    with lock:
        yield Turn(key)


def forget_run(run_id: str) -> None:
    """Drop a finished run's turns and stops (a long-lived `fleet serve` process runs many)."""
    with _guard:
        for key in [k for k in _turns if k[0] == run_id]:
            del _turns[key]
        for key in [k for k in _stops if k[0] == run_id]:
            del _stops[key]
