"""Fetch turns: one chunk per dataset calls the service at a time, while the chunk before it lands.

A chunk task fetches, then lands. Run one after another, the service sits idle while each chunk
lands; run two at once, calls in flight would double past `--concurrency`. So two chunks of a
dataset run side by side but take turns to fetch: the second fetches while the first lands, and
`concurrency` stays the most calls in flight per dataset.

A turn is not held by retries waiting out a Retry-After: a chunk whose only calls left are such
retries hands them to the next chunk of its dataset when one is waiting for the turn (its `Lane`),
lands what it settled and lets the turn go. The next chunk adopts them with their not-before times
and attempts (tasks/fetch/scheduler.py). The last chunk of a dataset, with nobody after it, waits them out.

Refusals are not kept here: every call asks the run's stops (tasks/control/stops.py) before it starts.
State is per process and per run; chunk tasks run in this process's threads.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

_guard = threading.Lock()
_turns: dict[tuple[str, str], tuple[threading.Lock, "Lane"]] = {}


class Lane:
    """One dataset's chunks in a run: how many wait for the turn, and the retries handed on to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._carried: list[Any] = []
        self._waiting = 0  # chunks waiting for the turn (or, in one task, chunks still to come)

    def hand_off(self, jobs: list[Any]) -> bool:
        """Leave `jobs` to the next chunk, if one is coming; False: nobody to take them."""
        with self._lock:
            if not self._waiting:
                return False
            self._carried.extend(jobs)
            return True

    def adopt(self) -> list[Any]:
        """What the chunks before this one handed on."""
        with self._lock:
            jobs, self._carried = self._carried, []
            return jobs

    @contextmanager
    def followed(self, more: bool = True) -> Iterator["Lane"]:
        """While inside, a chunk is known to come next (chunks run one after another in one task)."""
        with self._lock:
            self._waiting += more
        try:
            yield self
        finally:
            with self._lock:
                self._waiting -= more


@contextmanager
def fetch_turn(run_id: str, dataset: str) -> Iterator[Lane]:
    """Hold `dataset`'s turn to call the service for the length of the block."""
    key = (run_id, dataset)
    with _guard:
        turn, lane = _turns.setdefault(key, (threading.Lock(), Lane()))
    with lane.followed():  # waiting: the chunk holding the turn may hand its waiting retries to this one
        turn.acquire()
    try:
        yield lane
    finally:
        turn.release()


def forget_run(run_id: str) -> None:
    """Drop a finished run's turns (a long-lived `fleet serve` process runs many)."""
    with _guard:
        for key in [k for k in _turns if k[0] == run_id]:
            del _turns[key]
