"""SIGTERM and SIGINT cancel the run: no new call starts, the run ends within seconds, the rest stays pending.

Cron's `timeout`, Ctrl-C, a Prefect cancellation and a container stop all send one of them. The first
cancels the run (a stop of the key with the reason `cancelled`, tasks/control/stops.py): every fetch loop ends at
its next check, every wait within a fraction of a second (a `--notify` post too), the chunks hand back
their counts, what they received stays journalled for the next run to land (no landing, lake or report
after a stop: docs/stopping.md says why), the run is recorded `cancelled`, and the `fleet` command
exits at once (flows/cli.py). A second signal ends the process at once, as the signal means by default
(what a kill leaves, the next run lands: tasks/staging/journal.py).

`cancel_on_signals(run_id)` holds the handler for a block. The `fleet` command holds it from the moment
it has the run lock; the flows hold it too, so a flow run by `fleet serve` or a worker stops the same
way (Prefect replaces the SIGTERM handler while a flow runs; the flow's own block comes after that).
Before the run has started (`started=False`: the plan is being made, Prefect is starting) the first
signal also raises `RunCancelled` in the main thread, so the command ends at once, having called nothing.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from fleet_data.tasks.control import stops

SIGNALS = (signal.SIGTERM, signal.SIGINT)
T = TypeVar("T")
_received: dict[str, int] = {}  # run id -> stop signals received in this process
_holding: dict[str, int] = {}  # run id -> `cancel_on_signals` blocks open for it (they nest)
_signalled = False  # a stop signal was handled in this process (never reset: the process is ending)
_held: list[None] = []  # `held` blocks open (the main thread's: only it runs the handlers)
_deferred: list[int] = []  # a signal whose RunCancelled waits for the end of the outermost `held` block


class RunCancelled(BaseException):
    """A stop signal arrived before the run started (BaseException: nothing may swallow it on the way out)."""

    def __init__(self, signum: int):
        super().__init__(f"{signal.Signals(signum).name} before the run started: nothing was bought (no VIN was "
                         "asked about)")
        self.signum = signum


def _say(text: str) -> None:
    # os.write: a signal handler must not use a buffered stream the main thread may be writing to.
    with contextlib.suppress(OSError):
        os.write(2, f"{text}\n".encode())


class Handling:
    """What a `cancel_on_signals` block yields: set `started` once the run's calls may begin."""

    def __init__(self, started: bool):
        self.started = started


@contextlib.contextmanager
def cancel_on_signals(run_id: str, *, started: bool = True) -> Iterator[Handling]:
    """SIGTERM and SIGINT cancel run `run_id` while in the block (see the module docstring).

    Does nothing outside the main thread (only it may handle signals); nests, restoring what it replaced.
    """
    handling = Handling(started)
    if threading.current_thread() is not threading.main_thread():
        yield handling
        return

    def handle(signum: int, frame: Any) -> None:
        global _signalled
        _signalled = True
        _received[run_id] = _received.get(run_id, 0) + 1
        name = signal.Signals(signum).name
        if _received[run_id] > 1:
            _say(f"{name} again: stopping at once (the next run lands what this one received)")
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        _say(f"{name}: stopping within seconds. No new call starts; what was fetched lands in the next run; the "
             f"rest stays pending. Send it again to stop at once.")
        # From a thread: the main thread may hold the stops' lock at the moment the signal arrived.
        threading.Thread(target=stops.cancel_run, args=(run_id,), name="cancel-run", daemon=True).start()
        if not handling.started:
            if _held:
                _deferred.append(signum)
            else:
                raise RunCancelled(signum)

    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    for sig in SIGNALS:
        signal.signal(sig, handle)
    _holding[run_id] = _holding.get(run_id, 0) + 1
    try:
        yield handling
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        _holding[run_id] -= 1
        if not _holding[run_id]:  # the outermost block: the run is over in this process
            del _holding[run_id]
            _received.pop(run_id, None)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """A stop signal before the run started raises `RunCancelled` at the end of the block, not inside it: for a
    library that calls back into Python and wraps what the callback raises (pydantic's serializers made it an error
    of their own, which the command reported as a bug). The signal is handled (said, the run cancelled) at once."""
    _held.append(None)
    try:
        yield
    finally:
        _held.pop()
        if not _held and _deferred:
            raise RunCancelled(_deferred.pop())


def cancellable(fn: Callable[..., T]) -> Callable[..., T]:
    """Run `fn` (which takes a `run_id`) inside `cancel_on_signals(run_id)`: what the flows use."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> T:
        with cancel_on_signals(signature.bind(*args, **kwargs).arguments["run_id"]):
            return fn(*args, **kwargs)

    return run


def signalled() -> bool:
    """Whether a stop signal was handled in this process, for any run: the command then ends at once (flows/cli.py)."""
    return _signalled


def stop_requested() -> bool:
    """Whether a stop signal reached a run in progress in this process (a second one would stop it at once)."""
    return any(_received.values())


def cancelled(run_id: str) -> bool:
    """Whether a stop signal cancelled run `run_id` in this process."""
    return _received.get(run_id, 0) > 0 or stops.cancelled(run_id)

