"""The retry window: once a run has made every first attempt it can, its retries get `seconds` more.

Why. The spec's `Retry-After` is 60 s and a call may be retried 4 times: one unlucky call can
wait 4 minutes, and the recall chain (the batch's submit, status and results, then each VIN's
details) stacks such waits one after the other. At 30% faults a 1,000-VIN refresh took 465 s
against 41 s without faults. The window bounds that: a run ends at most `seconds` after it had
nothing new to call, whatever the faults, and what was still waiting is *pending* with the
reason `retry window closed`: counted in `run_datasets`, due again next run, never lost and
never failed. Within the window every retry still honours its own Retry-After.

When it opens. Schedulers (tasks/fetch/scheduler.py) tell the window about the first attempts they
queue (`expect`) and make (`made`). It opens the moment none is left, and closes `seconds`
later. New work queued after that (the next chunk of a dataset, the datasets after plate
lookups) re-opens it: those VINs get their own window once their first attempts are made.
Work that *follows* from other calls' answers (recall details after the batch's results, a
batch's status and results after its submit) is queued with `follows=True`: its first attempts
are made however late, but it does not push the close further out, or every link of a chain
would add a window of its own.

What closes. A retry still waiting in a scheduler's queue ends pending at the close; a retry
asked for after it is not queued; a wait in place (`Stops.call`) ends too. First attempts are
always made. `seconds=None`: no window (retries run until their budget is spent).

One per run in a process, inside the run's `Stops`; worker processes (`--workers`) keep their own.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from fleet_data.tasks.settings import DEFAULT_RETRY_WINDOW, SettingsError, process_settings

WINDOW_CLOSED = "retry window closed"
DEFAULT_SECONDS = DEFAULT_RETRY_WINDOW  # the bound: a faulted run ends within its fault-free time + 3 minutes
ENV = "FLEET_RETRY_WINDOW"  # seconds, also read by worker processes (they inherit the environment)


def default_seconds() -> float | None:
    """The window for runs of this process: `FLEET_RETRY_WINDOW` if set ("off": none), else 180 s.

    A worker process's runs take it from the environment `fleet refresh` exported (tasks/settings.py's
    grammar: seconds, or with s, m or h). A value that cannot work is refused before any run starts
    (flows/checks.py); should one reach a worker anyway, its runs keep the default.
    """
    try:
        return process_settings().retry_window
    except SettingsError:
        return DEFAULT_SECONDS


class RetryWindow:
    """One run's retry window (see the module's docstring). Thread-safe: chunks run in threads."""

    def __init__(self, seconds: float | None = DEFAULT_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self._clock = seconds, clock
        self._lock = threading.Lock()
        self._first = 0  # first attempts queued and not yet made
        self._opened: float | None = None  # when the last of them was made

    def expect(self, n: int, *, follows: bool = False) -> None:
        """`n` first attempts were queued; unless they `follow` others' answers, the window is shut again."""
        if n <= 0:
            return
        with self._lock:
            self._first += n
            if not follows:
                self._opened = None

    def made(self, n: int = 1) -> None:
        """`n` queued first attempts were made (or dropped by a stop); the last one opens the window."""
        if n <= 0:
            return
        with self._lock:
            self._first = max(self._first - n, 0)
            if not self._first and self._opened is None:
                self._opened = self._clock()

    def closes_at(self) -> float | None:
        """When retries stop (the scheduler's clock); None while first attempts are left, or without a window."""
        with self._lock:
            if self.seconds is None or self._opened is None:
                return None
            return self._opened + self.seconds

    def reason(self) -> str | None:
        """`WINDOW_CLOSED` once the window has closed; None before."""
        closes = self.closes_at()
        return WINDOW_CLOSED if closes is not None and self._clock() >= closes else None
