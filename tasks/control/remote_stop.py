"""A run's stop, told to its fetch tasks on a Dask cluster.

A stop signal or a halt reaches the flow's process only. A chunk on a Dask worker has its own stops
(tasks/control/stops.py): it would go on calling until its chunk is done, a minute and more after the command
ended when it sits out a Retry-After. So the flow sets a named Dask Event (`name(run_id)`) as soon as its run
stops (`Relay`), and each fetch task on the cluster watches it while its chunk runs (`watched`): once it is set,
the task cancels its process's stops for the run, as the signal did the flow's. No new call starts, a retry's
wait ends, and the chunk hands back what it has (its journal lands in the next run if the flow is gone).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fleet_data.tasks.control import stops

POLL = 0.25  # seconds: how soon a stop reaches the cluster's chunks


def name(run_id: str) -> str:
    return f"fleet-stop-{run_id}"


class Relay:
    """The flow's side: sets the run's Event on the cluster once `stopped()` says the run stopped."""

    def __init__(self, run_id: str, client: Any, stopped: Callable[[], bool]):
        self.run_id, self.client, self.stopped = run_id, client, stopped
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dask-stop-relay", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        from distributed import Event

        while not self._done.wait(POLL):
            if self.stopped():
                try:
                    Event(name(self.run_id), client=self.client).set()
                except Exception:  # noqa: BLE001 - the scheduler is gone: its chunks are gone with it
                    pass
                return


@contextmanager
def watched(run_id: str, event: str | None) -> Iterator[None]:
    """A fetch task's side, for the block: the run's stops cancelled here once the flow sets `event` (None: not on a
    cluster, nothing to watch)."""
    if event is None:
        yield
        return
    from distributed import Event, get_client

    client = get_client()  # the worker's, found from the task's thread only
    done = threading.Event()

    def watch() -> None:
        try:
            told = Event(event, client=client)  # made with its client here: an Event made elsewhere refuses this thread
        except Exception:  # noqa: BLE001 - the scheduler is gone: the flow's watch says so
            return
        while not done.is_set():
            try:
                if told.wait(POLL):
                    stops.cancel_run(run_id)
                    return
            except Exception:  # noqa: BLE001 - the scheduler is gone: the flow's watch says so
                return

    thread = threading.Thread(target=watch, name="dask-stop-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=2 * POLL + 1)
