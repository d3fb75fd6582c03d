"""Refusals that stop calling, shared by every call of a run in this process.

A refusal has a scope. 401 (key missing, unknown or inactive), 403 `blocked` and 402
`insufficient_credits` concern the key: every endpoint stops. A 403 tier message and a 429 quota
concern one API (a quota group: `connectors.ENDPOINTS[...].api`): only it stops. Every call asks
`admit` first, so no call starts once its key or API is stopped; calls already in flight finish.

Until the key has been accepted once in the run, one call at a time goes out; until an API has
been accepted once, one call at a time to it. A refused key therefore costs one call, and an API
the plan lacks one call, instead of a burst of `--concurrency` calls per endpoint. The wait is one
round trip per API at the start of a run. An attempt that gets no verdict (a 5xx, a dropped
connection) lets the next call try while it backs off.

An endpoint can also be **paused**: one that answers mostly 5xx for a sustained window is down, and
calling it on only adds 60 s Retry-After waits. Every answered attempt of a scheduled call is
`observe`d (tasks/fetch/scheduler.py); the endpoint is paused for the rest of the run when, of the answers
of the last `PausePolicy.window` seconds (60), at least `min_calls` (20) came back and at least
`share` (80%) of them were 5xx or no answer at all, and the endpoint has been called for at least
that window. Its remaining VINs become pending with the reason (`paused: 5xx on 85% of 40 calls for
60s`) and are due again next run. Why these: 60 s is the spec's Retry-After, so the window spans a
whole retry cycle (each failing call's first attempt or its retry), not a burst; 80% is far above
the 30% our fault soak injects (of 20 calls at 30%, 16 failing has odds of about 1 in 200,000)
while a real outage answers ~100%; 20 calls, so that a handful of always-failing VINs is no outage.
The pause scope is the endpoint (`connectors.ENDPOINTS` name), not the quota group: batch recall
checks go on when per-VIN recall lookups fail.

Cancellation (SIGTERM, SIGINT: tasks/control/signals.py) is a stop of the key with the reason `cancelled`:
the same checks end every fetch loop, and whatever waits notices a stop of the key within a second: a
batch poll through `pause`, a retry in a scheduler's queue through `reason`, a retry waiting in place
through `call` (connectors.retry.waits_end_when, the one way such a wait ends early; the run's retry
window closing ends it too).

Chunks run in threads, each with its own event loop: waiting is cross-thread and cross-loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Awaitable, Callable, TypeVar

from fleet_data.tasks.errors import FleetError
from fleet_data.connectors import errors as e
from fleet_data.connectors.retry import RetryAbandoned, waits_end_when

from fleet_data.tasks.control.retry_window import RetryWindow, default_seconds

# Errors after which no further call to the same endpoint can succeed this run.
STOPPING_ERRORS = (e.QuotaExceededError, e.InsufficientCreditsError, e.PermissionDeniedError, e.AuthenticationError)
_KEY_WIDE = (e.AuthenticationError, e.KeyBlockedError, e.InsufficientCreditsError)
_REFUSALS = frozenset({401, 402, 403, 429})
KEY = "the key"
CANCELLED = "cancelled"  # the reason a run stopped by SIGTERM/SIGINT gives (runs.status too)
POLL = 0.25  # seconds: how often a wait looks at the stops
T = TypeVar("T")


def _proves_acceptance(status: int | None) -> bool:
    """An answer only an accepted key gets: data, or a stable "no data" (a 400 may come before the key check)."""
    return status is not None and (200 <= status < 300 or status in (404, 409))


@dataclass(frozen=True)
class PausePolicy:
    """When an endpoint is paused (see the module's docstring for why these values)."""

    window: float = 60.0  # seconds of answers looked at, and how long the endpoint must have been called
    share: float = 0.8  # of those answers, 5xx or none
    min_calls: int = 20  # at least this many answers in the window


def _failing(status: int | None) -> bool:
    """A 5xx, or no HTTP answer at all (timeout, dropped connection)."""
    return status is None or status >= 500


class _Window:
    """One endpoint's answers of the last `window` seconds: (time, failing), with a running count."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.answers: deque[tuple[float, bool]] = deque()
        self.failing = 0

    def add(self, at: float, failing: bool, window: float) -> None:
        self.answers.append((at, failing))
        self.failing += failing
        while self.answers and self.answers[0][0] < at - window:
            self.failing -= self.answers.popleft()[1]


class Stopped(FleetError):
    """A call that was not started: its key or its API is stopped in this run (caught inside the run: a bug if not)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def is_key_wide(exc: BaseException) -> bool:
    return isinstance(exc, _KEY_WIDE)


class Pass:
    """Leave to start one call. `stopped` says why it may not; `answered`/`release` end a probe."""

    def __init__(self, stops: "Stops | None", api: str, stopped: str | None, probing: frozenset[str] = frozenset()):
        self._stops, self.api, self.stopped, self._probing = stops, api, stopped, probing

    def answered(self, status: int | None) -> None:
        """An attempt came back with `status` (None: no answer). A refusal is settled by `Stops.refuse`."""
        if self._probing and status not in _REFUSALS and self._stops is not None:
            probing, self._probing = self._probing, frozenset()
            self._stops._settle(probing, self.api, proven=_proves_acceptance(status))

    def release(self) -> None:
        """The call is over (whatever happened): let the next caller through."""
        if self._probing and self._stops is not None:
            probing, self._probing = self._probing, frozenset()
            self._stops._settle(probing, self.api, proven=False)


class Stops:
    """One run's stops: what is stopped and why, which scopes are proven, who is probing."""

    def __init__(self, pause: PausePolicy | None = PausePolicy(), clock: Callable[[], float] = time.monotonic,
                 window: RetryWindow | None = None) -> None:
        self.window = window or RetryWindow(None)  # the run's retry window (tasks/control/retry_window.py); none by default
        self._lock = threading.Lock()
        self._stopped: dict[str, str] = {}  # scope (KEY or an API) -> reason
        self._paused: dict[str, str] = {}  # endpoint -> reason
        self._windows: dict[str, _Window] = {}
        self._pause, self._clock = pause, clock
        self._proven: set[str] = set()
        self._probing: set[str] = set()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []
        self.cancelled = False

    def cancel(self) -> None:
        """Stop every call of the run: no new call starts, waits end (the run was asked to stop)."""
        self.cancelled = True
        self.halt(CANCELLED)

    def halt(self, reason: str) -> None:
        """Stop every call of the run for `reason` (a signal, a full disk, a vanished store): as `cancel`."""
        with self._lock:
            self._stopped.setdefault(KEY, reason)
            waiters, self._waiters = self._waiters, []
        _wake(waiters)

    def stopping(self, api: str | None = None) -> bool:
        """Whether calls to `api` (any call, without one) are stopped (a client's `interrupt` may ask it)."""
        with self._lock:
            return KEY in self._stopped or (api is not None and api in self._stopped)

    async def pause(self, seconds: float, api: str | None = None) -> bool:
        """Sleep up to `seconds`; True, early, once calls to `api` are stopped (looked at every POLL s)."""
        end = time.monotonic() + seconds
        while not self.stopping(api):
            left = end - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(POLL, left))
        return True

    def _reason(self, api: str, endpoint: str | None) -> str | None:
        return self._stopped.get(KEY) or self._stopped.get(api) or (self._paused.get(endpoint) if endpoint else None)

    def reason(self, api: str, endpoint: str | None = None) -> str | None:
        """Why calls to `api` (and to `endpoint`, if named) are stopped in this run, if they are."""
        with self._lock:
            return self._reason(api, endpoint)

    def observe(self, endpoint: str, status: int | None) -> None:
        """An attempt to `endpoint` came back with `status` (None: no answer); may pause the endpoint."""
        if self._pause is None:
            return
        policy, now = self._pause, self._clock()
        with self._lock:
            if endpoint in self._paused:
                return
            window = self._windows.setdefault(endpoint, _Window(now))
            window.add(now, _failing(status), policy.window)
            calls = len(window.answers)
            if (now - window.started < policy.window or calls < policy.min_calls
                    or window.failing < policy.share * calls):
                return
            self._paused[endpoint] = (f"paused: 5xx on {window.failing * 100 // calls}% of {calls} calls "
                                      f"for {policy.window:g}s")
            waiters, self._waiters = self._waiters, []
        _wake(waiters)

    def refuse(self, api: str, exc: e.APIStatusError) -> str:
        """Record a refusal with its scope; returns the reason the caller reports."""
        reason = f"{exc.status} {exc.message}"
        scope = KEY if is_key_wide(exc) else api
        with self._lock:
            self._stopped.setdefault(scope, reason)
            if scope != KEY:
                self._proven.add(KEY)  # the service knew the key: it refused the API, not the key
            reason = self._stopped.get(KEY) or self._stopped[scope]
            waiters, self._waiters = self._waiters, []
        _wake(waiters)
        return reason

    async def admit(self, api: str, endpoint: str | None = None) -> Pass:
        """Wait until a call to `api` (`endpoint`) may start (or is stopped)."""
        while True:
            with self._lock:
                stopped = self._reason(api, endpoint)
                if stopped:
                    return Pass(None, api, stopped)
                unproven = {s for s in (KEY, api) if s not in self._proven}
                if not unproven & self._probing:
                    self._probing |= unproven
                    return Pass(self, api, None, frozenset(unproven))
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.append((asyncio.get_running_loop(), waiter))
            try:
                await waiter
            finally:
                with self._lock:
                    if (asyncio.get_running_loop(), waiter) in self._waiters:
                        self._waiters.remove((asyncio.get_running_loop(), waiter))

    async def call(self, api: str, make: Callable[[], Awaitable[T]], on_leave: Callable[[Pass | None], None]) -> T:
        """Run one call once admitted; a refusal stops its scope. Raises `Stopped` if it may not start.

        `on_leave` hands the leave to the client's call observer (so the first answer settles a probe)
        and takes it back (None) when the call is over.
        """
        leave = await self.admit(api)
        if leave.stopped:
            raise Stopped(leave.stopped)
        on_leave(leave)
        try:
            # A retry's wait ends at a stop, or when the run's retry window closes, within a second.
            with waits_end_when(lambda: self.reason(api) or self.window.reason()):
                return await make()
        except RetryAbandoned as exc:
            raise Stopped(exc.reason) from None
        except STOPPING_ERRORS as exc:
            self.refuse(api, exc)
            raise
        finally:
            on_leave(None)
            leave.release()

    def _settle(self, probing: frozenset[str], api: str, *, proven: bool) -> None:
        with self._lock:
            self._probing -= probing
            if proven:
                self._proven |= {KEY, api}
            waiters, self._waiters = self._waiters, []
        _wake(waiters)


def _wake(waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]]) -> None:
    for loop, future in waiters:
        try:
            loop.call_soon_threadsafe(_resolve, future)
        except RuntimeError:  # that loop has closed: nobody is waiting there any more
            pass


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


_guard = threading.Lock()
_runs: dict[str, Stops] = {}


def for_run(run_id: str) -> Stops:
    """The run's stops, shared by its chunk tasks, recall batches and recall details in this process."""
    with _guard:
        if run_id not in _runs:
            _runs[run_id] = Stops(window=RetryWindow(default_seconds()))
        return _runs[run_id]


def cancel_run(run_id: str) -> None:
    """Cancel run `run_id` in this process (a signal handler calls it: it only takes short locks)."""
    for_run(run_id).cancel()


def cancelled(run_id: str) -> bool:
    """Whether run `run_id` was cancelled in this process."""
    with _guard:
        stops = _runs.get(run_id)
    return stops is not None and stops.cancelled


def forget_run(run_id: str) -> None:
    """Drop a finished run's stops (a long-lived `fleet serve` process runs many)."""
    with _guard:
        _runs.pop(run_id, None)
