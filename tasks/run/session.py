"""A run's hold on its database: the lock, the working store, publishing and the progress file.

    session = hold_run(db, run_id, "refresh", wait=False, say=print)   # RunLocked if another run holds it
    with session:
        ...                                   # the run: tasks write the working store (open_database)
    # left: published into `db` whatever happened, progress file removed, lock released

Taking the lock first (outermost hold in the process): runs a dead process left `running` in the
working store are marked `interrupted` (nobody else can be running: we hold the lock), the progress
file is started, and a database never published before is published at once. During the run,
`publish_if_due(db)` after a landing publishes when the last publish is older than
FLEET_PUBLISH_SECONDS (default 120). Nothing here imports Prefect: `fleet` takes the lock before
Prefect starts.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, ParamSpec, TypeVar

from tasks.control import progress
from tasks.run import lock as runlock
from tasks.store import published as store
from tasks.run.progressfile import ProgressFile, Tee, progress_path
from tasks.settings import option_argument, process_settings

P = ParamSpec("P")
R = TypeVar("R")


def publish_seconds() -> float:
    """How old the last publish may get before a landing publishes again (FLEET_PUBLISH_SECONDS).

    Read at each landing (a test changes it mid-run); a value that cannot work was refused before the run.
    """
    return process_settings().publish_seconds


def new_run_id() -> str:
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _Run:
    """What the outermost hold keeps for the run's lifetime."""

    def __init__(self, db: str, run_id: str, progress_file: ProgressFile):
        self.db, self.run_id, self.progress = db, run_id, progress_file
        self.last_publish = time.monotonic()
        self.publishing = threading.Lock()

    def due(self) -> bool:
        return time.monotonic() - self.last_publish >= publish_seconds()

    def publish(self, only_if_due: bool = False) -> bool:
        if not self.publishing.acquire(blocking=not only_if_due):
            return False  # another chunk's thread is publishing right now: that one is enough
        try:
            if only_if_due and not self.due():
                return False
            at = store.publish(self.db)
            self.last_publish = time.monotonic()
            self.progress.published(at)
            return True
        finally:
            self.publishing.release()


_runs: dict[str, _Run] = {}


def _key(db: str | Path) -> str:
    return str(Path(db).resolve())


class RunSession:
    """One hold on a database's lock; leaving the outermost one publishes and releases."""

    def __init__(self, db: str, run: _Run, outermost: bool):
        self.db, self.run, self.outermost = db, run, outermost

    @property
    def progress(self) -> ProgressFile:
        return self.run.progress

    def __enter__(self) -> "RunSession":
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.outermost:
            runlock.release(self.db)
            return
        try:
            self.run.progress.phase("publishing")
            self.run.publish()  # every run ends published, whatever its status
        finally:
            _runs.pop(_key(self.db), None)
            self.run.progress.remove()
            runlock.release(self.db)


def hold_run(db: str | Path, run_id: str, command: str, *, wait: bool = False,
             say: Callable[[str], None] = _stderr) -> RunSession:
    """Take `db`'s lock for this run (see the module docstring); raises runlock.RunLocked if another run holds it."""
    db = str(db)

    def waiting(holder: runlock.Holder | None) -> None:
        who = holder.describe() if holder else "another run (starting up)"
        say(f"waiting for {who} to finish on {db} ...")

    outermost = runlock.acquire(db, run_id, command, wait=wait, on_wait=waiting, say=say)
    if not outermost:
        return RunSession(db, _runs[_key(db)], False)
    try:
        from tasks.store.database import open_database

        holder = runlock.held_here(db)
        run = _Run(db, run_id, ProgressFile(db, run_id, command, holder.started if holder else ""))
        with open_database(db) as working:
            working.execute("mark_interrupted_runs", now=datetime.now(timezone.utc))
        _runs[_key(db)] = run
        if not Path(db).is_file():
            run.publish()  # analysts and `fleet status` have a file from the first minute
    except BaseException:
        _runs.pop(_key(db), None)
        progress_path(db).unlink(missing_ok=True)
        runlock.release(db)
        raise
    return RunSession(db, run, True)


def holding(db: str | Path) -> bool:
    """Whether this process holds `db`'s run lock (only the holder may clear other runs' staging)."""
    return runlock.held_here(db) is not None


def publish_if_due(db: str | Path) -> bool:
    """After a landing: publish when this process holds the run and the last publish is old enough."""
    run = _runs.get(_key(db))
    return run is not None and run.due() and run.publish(only_if_due=True)


def phase(db: str | Path, name: str) -> None:
    run = _runs.get(_key(db))
    if run is not None:
        run.progress.phase(name)


def holds_run_lock(command: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Make a flow take its database's lock for its whole run (a no-op hold when `fleet` took it already).

    The flow must take `db` (itself or in its `options`) and `run_id` parameters; a flow started by `fleet serve` or a worker
    queues behind a run in progress (one line on stderr) rather than failing.
    """

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            bound.arguments["run_id"] = bound.arguments.get("run_id") or new_run_id()
            db = option_argument(bound.arguments, "db")
            with hold_run(db, bound.arguments["run_id"], command, wait=True) as session:
                before = progress.current()
                progress.use(Tee(before, session.progress))
                try:
                    return fn(*bound.args, **bound.kwargs)
                finally:
                    progress.use(before)

        return run

    return wrap
