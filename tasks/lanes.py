"""Fetch turns: one chunk per dataset calls the service at a time, while the chunk before it lands.

A chunk task fetches, then lands. Run one after another, the service sits idle while each chunk
lands; run two at once, calls in flight would double past `--concurrency`. So two chunks of a
dataset run side by side but take turns to fetch: the second fetches while the first lands, and
`concurrency` stays the most calls in flight per dataset.

Refusals are not kept here: every call asks the run's stops (tasks/stops.py) before it starts.
State is per process and per run; chunk tasks run in this process's threads.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

_guard = threading.Lock()
_turns: dict[tuple[str, str], threading.Lock] = {}


@contextmanager
def fetch_turn(run_id: str, dataset: str) -> Iterator[None]:
    """Hold `dataset`'s turn to call the service for the length of the block."""
    key = (run_id, dataset)
    with _guard:
        lock = _turns.setdefault(key, threading.Lock())
    with lock:
        yield


def forget_run(run_id: str) -> None:
    """Drop a finished run's turns (a long-lived `fleet serve` process runs many)."""
    with _guard:
        for key in [k for k in _turns if k[0] == run_id]:
            del _turns[key]
