"""The call scheduler: at most `slots` calls in flight, and a call waiting to be retried holds none.

Every per-VIN dataset, recall campaign details included, calls the service through it (tasks/fetch/enrich.py,
tasks/recalls/details.py). A job is one call to make (one VIN of a dataset, one model's campaign list).
A slot takes the next job that is ready and makes one attempt. When the client answers a retryable
failure with `RetryLater` (connectors/retry.py: the spec's Retry-After, or the policy's backoff),
the job goes back to the queue with its not-before time and the slot takes another job; the job is
not sent again before that time, with the same `CallAttempts` (Idempotency-Key, attempts, retries
spent), so the policy's maximum still holds.

Before each attempt the run's stops are asked (tasks/control/stops.py): a refusal, a cancellation or a paused
endpoint leaves the job, and every job still queued, to `stopped` (pending, with the reason). Slots
that have nothing ready look at the stops every `POLL_SECONDS`, so a job waiting out a 60 s
Retry-After ends as pending within a second of a run-wide stop, not a minute later.

The run's retry window (tasks/control/retry_window.py) bounds the waiting: the scheduler tells it about
the first attempts it queues and makes, and once the window has closed a retry still queued, or
asked for afterwards, is not sent: its job goes to `stopped` with `retry window closed` (pending).

A chunk whose only jobs left are waiting retries may hand them to the next chunk of its dataset,
if one is waiting for its turn (tasks/fetch/lanes.py): the chunk lands what it settled and its turn goes
on, instead of idling until the last retry comes back.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from fleet_data.connectors.retry import CallAttempts, RetryLater, scheduled

from fleet_data.tasks.control.retry_window import WINDOW_CLOSED
from fleet_data.tasks.control.stops import Pass, Stops

POLL_SECONDS = 0.5  # how often idle slots look at the stops (set from other threads, a signal handler)
T = TypeVar("T")


@dataclass(eq=False)
class Job(Generic[T]):
    """One call to make: what it is for, its attempts so far, and when it may be sent again."""

    item: T
    call: CallAttempts = field(default_factory=CallAttempts)
    not_before: float = 0.0


class Scheduler(Generic[T]):
    """Runs jobs against one endpoint (`api` is its quota group, for the stops) with `slots` calls at most."""

    def __init__(self, stops: Stops, api: str, endpoint: str, *, slots: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stops, self.api, self.endpoint, self.slots = stops, api, endpoint, max(1, slots)
        self._clock = clock
        self._ready: deque[Job[T]] = deque()
        self._waiting: list[tuple[float, int, Job[T]]] = []  # a heap by not-before
        self._order = itertools.count()
        self._busy = 0  # jobs taken by a slot and not yet back
        self._halted: str | None = None
        self._changed: asyncio.Event | None = None
        self.handed_off: list[Job[T]] = []

    def add(self, jobs: Iterable[Job[T]], *, follows: bool = False) -> None:
        """Queue `jobs`. `follows`: they come from other calls' answers (recall details after the batch's
        results), so their first attempts do not re-open the run's retry window (tasks/control/retry_window.py)."""
        first = 0
        for job in jobs:
            first += not job.call.attempts
            self._queue(job)
        self.stops.window.expect(first, follows=follows)

    def halt(self, reason: str) -> None:
        """No further attempt in this scheduler (e.g. the budget is spent); queued jobs go to `stopped`."""
        self._halted = self._halted or reason
        self._poke()

    async def run(self, attempt: Callable[[Job[T], Pass], Awaitable[None]],
                  stopped: Callable[[Job[T], str], None],
                  hand_off: Callable[[list[Job[T]]], bool] | None = None) -> None:
        """Run every job to its end.

        `attempt(job, leave)` makes one attempt (the client call inside is `scheduled`): it settles the
        job, or lets `RetryLater` out to queue it again. `stopped(job, reason)` takes a job that will
        not be called. `hand_off(jobs)` may take the waiting retries once nothing else is left (True:
        taken, they are in `handed_off`).
        """
        self._changed = asyncio.Event()
        count = len(self._ready) + len(self._waiting)
        await asyncio.gather(*(self._slot(attempt, stopped, hand_off) for _ in range(min(self.slots, count))))

    async def _slot(self, attempt: Callable[[Job[T], Pass], Awaitable[None]], stopped: Callable[[Job[T], str], None],
                    hand_off: Callable[[list[Job[T]]], bool] | None) -> None:
        while (job := await self._next(stopped, hand_off)) is not None:
            try:
                leave = await self.stops.admit(self.api, self.endpoint)
                if leave.stopped:
                    stopped(job, leave.stopped)
                    continue
                try:
                    with scheduled(job.call):
                        await attempt(job, leave)
                except RetryLater as later:  # back to the queue; this slot takes another job
                    if self.stops.window.reason():  # asked for after the close: not sent again
                        stopped(job, WINDOW_CLOSED)
                    else:
                        job.not_before = self._clock() + later.delay
                        self._queue(job)
                finally:
                    leave.release()
            finally:
                self._busy -= 1
                self._poke()

    async def _next(self, stopped: Callable[[Job[T], str], None],
                    hand_off: Callable[[list[Job[T]]], bool] | None) -> Job[T] | None:
        """The next job to attempt, once it is ready; None when there is nothing left for this slot."""
        assert self._changed is not None
        while True:
            self._changed.clear()  # before looking: a change from now on wakes the wait below
            reason = self._halted or self.stops.reason(self.api, self.endpoint)
            if reason:
                drained = self._drain()
                self.stops.window.made(sum(not j.call.attempts for j in drained))
                for gone in drained:
                    stopped(gone, reason)
            elif self.stops.window.reason():  # the retry window has closed: retries are not sent again
                for gone in self._drain_retries():
                    stopped(gone, WINDOW_CLOSED)
            now = self._clock()
            job: Job[T] | None = None
            if self._ready:
                job = self._ready.popleft()
            elif self._waiting and self._waiting[0][0] <= now:
                job = heapq.heappop(self._waiting)[2]
            if job is not None:
                self._busy += 1
                if not job.call.attempts:
                    self.stops.window.made()
                return job
            if not self._waiting:
                if not self._busy:
                    self._poke()  # the other idle slots end too
                    return None
            elif not self._busy and hand_off is not None:
                waiting = [j for _, _, j in sorted(self._waiting, key=lambda w: w[:2])]
                if hand_off(waiting):
                    self.handed_off.extend(waiting)
                    self._waiting.clear()
                    continue
            pause = POLL_SECONDS if not self._waiting else min(POLL_SECONDS, self._waiting[0][0] - now)
            try:
                await asyncio.wait_for(self._changed.wait(), max(pause, 0.0))
            except TimeoutError:
                pass

    def _queue(self, job: Job[T]) -> None:
        if job.not_before <= self._clock():
            self._ready.append(job)
        else:
            heapq.heappush(self._waiting, (job.not_before, next(self._order), job))
        self._poke()

    def _drain(self) -> list[Job[T]]:
        jobs = [*self._ready, *(j for _, _, j in sorted(self._waiting, key=lambda w: w[:2]))]
        self._ready.clear()
        self._waiting.clear()
        return jobs

    def _drain_retries(self) -> list[Job[T]]:
        """Take out every queued job that was attempted before (a retry); first attempts stay."""
        retries = [j for j in self._ready if j.call.attempts]
        retries += [j for _, _, j in sorted(self._waiting, key=lambda w: w[:2])]  # waiting: always retries
        self._ready = deque(j for j in self._ready if not j.call.attempts)
        self._waiting.clear()
        return retries

    def _poke(self) -> None:
        if self._changed is not None:
            self._changed.set()
