"""The chunks in flight: each as it finishes, and none waited for past a stopped run's deadline.

A run stopped by SIGTERM/SIGINT (tasks/control/signals.py) gives the chunks already out
`FLEET_STOP_SECONDS` to hand back their counts (their calls end at the stop within a second); a chunk
still out then is left, its VINs counted pending, and its answers, journalled as they came, land in
the next run (docs/stopping.md). One done-callback per chunk and one queue: the wait looks at the
stop every `POLL` seconds without registering anything again.
"""

from __future__ import annotations

import queue
import time
from typing import Any, Generic, TypeVar

from fleet_data.tasks.control.signals import cancelled
from fleet_data.tasks.control.resources import SERVICE_LOST, halted
from fleet_data.tasks.settings import deadline_settings

POLL = 0.25  # seconds
T = TypeVar("T")


def _service_lost(run_id: str) -> bool:
    """Halted because a service it depends on is gone (tasks/control/services.py): a chunk on a cluster that lost
    its workers never comes back, so it gets the same deadline as after a stop."""
    halt = halted(run_id)
    return halt is not None and halt[0] == SERVICE_LOST


class InFlight(Generic[T]):
    """Futures of run `run_id` with a tag each (what the caller needs to account for one)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._tags: dict[Any, T] = {}
        self._done: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._stop_by: float | None = None

    def __bool__(self) -> bool:
        return bool(self._tags)

    def tags(self) -> list[T]:
        return list(self._tags.values())

    def add(self, future: Any, tag: T) -> None:
        self._tags[future] = tag
        future.add_done_callback(self._done.put)

    def next(self) -> tuple[Any, T] | None:
        """The next future to finish with its tag; None once the run is stopped and its deadline passed."""
        while self._tags:
            if self._stop_by is None and (cancelled(self.run_id) or _service_lost(self.run_id)):
                self._stop_by = time.monotonic() + deadline_settings().stop_seconds
            wait = POLL if self._stop_by is None else min(POLL, max(0.0, self._stop_by - time.monotonic()))
            try:
                future = self._done.get(timeout=wait)
            except queue.Empty:
                if self._stop_by is not None and time.monotonic() >= self._stop_by:
                    return None
                continue
            if future in self._tags:
                return future, self._tags.pop(future)
        return None

    def ready(self) -> list[tuple[Any, T]]:
        """The futures that have finished besides, without waiting, with their tags."""
        finished: list[tuple[Any, T]] = []
        while True:
            try:
                future = self._done.get_nowait()
            except queue.Empty:
                return finished
            if future in self._tags:
                finished.append((future, self._tags.pop(future)))

    def leave(self) -> list[T]:
        """Stop waiting for what is still out; the tags of what was left."""
        left, self._tags = list(self._tags.values()), {}
        return left
