"""The run context: one object per run that owns its lock, its working store, its staging area and its publishing.

    context = hold_run(db, run_id, "refresh", wait=False, say=print)   # RunLocked if another run holds it
    with context:
        context.store                # the run's one DuckDB connection (the working store), open all run long
        context.staging              # the run's staging area (tasks/staging/area.py): the only code that knows its layout
        context.publish_if_due()     # after a landing: analysts see long runs' progress every few minutes
    # left: published into `db` whatever happened, store closed, progress file removed, lock released

The outermost hold in a process creates the context (a nested hold, as when `fleet` took the lock
before the flow starts, shares it). Creating it: runs a dead process left `running` are marked
`interrupted` (nobody else can be running: we hold the lock), the progress file is started, and a
database never published before is published at once. Prefect tasks take the run id, a small value,
and find the context with `current(run_id)`: nothing below the flow opens the database or takes its
path. Fetch tasks that run in other processes (`--workers`, `--dask`) have no context and need none:
they write staged files only. Nothing here imports Prefect: `fleet` takes the lock before Prefect starts.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ParamSpec, TypeVar

from fleet_data.tasks.control import progress, resources
from fleet_data.tasks.run import lock as runlock
from fleet_data.tasks.run.progressfile import ProgressFile, Tee, progress_path
from fleet_data.tasks.settings import option_argument, process_settings
from fleet_data.tasks.staging.area import StagingArea
from fleet_data.tasks.store import published
from fleet_data.tasks.store.database import Database, open_database
from fleet_data.tasks.store.files import new_run_id as new_run_id
from fleet_data.tasks.store.files import previous_path, publishing_path, working_path

if TYPE_CHECKING:
    from fleet_data.connectors.keycheck import KeyCheck

P = ParamSpec("P")
R = TypeVar("R")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class RunContext:
    """What a run owns for its lifetime; made by the outermost hold on its database's lock."""

    def __init__(self, db: str, run_id: str, command: str, progress_file: ProgressFile,
                 publish_seconds: float):
        self.db, self.run_id, self.command = db, run_id, command
        self.progress = progress_file
        self.publish_seconds = publish_seconds
        self.staging = StagingArea.beside(db, run_id)
        self.store: Database = open_database(db)  # the run's one connection: every stage lands through it
        self.last_publish = time.monotonic()
        self._publishing = threading.Lock()
        # dataset -> its staged due list (None: nothing due), as the plan made them: what it leaves pending is
        # worked out from these when it finishes (tasks/land/pending.py)
        self.planned: dict[str, str | None] = {}
        # The command's free key check (connectors/keycheck.py), made before the run started: its ledger row lands
        # once the run is recorded (tasks/steps/refresh_steps.py `ingest`), so it says the run's service.
        self.key_check: KeyCheck | None = None
        self.watch = _watch(db, run_id, self.staging)
        self.store.full_disk = self.watch.write_failed  # a write refused for space halts the run, then is tried again

    def use_staging(self, remote: str | None, lake: str | None = None) -> StagingArea:
        """Stage fetched answers on object storage (`--staging s3://...`) instead of beside the database;
        `lake`: the run writes there too, so its disk is watched as well."""
        self.staging = StagingArea.beside(self.db, self.run_id, remote=remote)
        self.watch.place("staging", self.staging.root)
        self.watch.place("lake", lake)
        return self.staging

    def may_publish(self) -> bool:
        """Whether a publish can go ahead: the store and lock are the run's own, and its disk has room for the copy
        (a run halted because a service it depends on was lost still publishes what it landed)."""
        try:
            needed = os.stat(self.store.path).st_size
        except OSError:
            needed = 0
        with contextlib.suppress(OSError):  # the snapshot the last publish replaced is written over (or freed)
            needed = max(0, needed - os.stat(previous_path(self.db)).st_size)
        return self.watch.check(needed, publishing=True) is None

    def due(self) -> bool:
        return time.monotonic() - self.last_publish >= self.publish_seconds

    def publish(self, only_if_due: bool = False) -> bool:
        if not self._publishing.acquire(blocking=not only_if_due):
            return False  # another chunk's thread is publishing right now: that one is enough
        try:
            if only_if_due and not self.due():
                return False
            if not self.may_publish():
                return False  # the run is halted (tasks/control/resources.py): it ends failed, saying why
            try:
                at = published.publish(self.store, self.db)
            except OSError as exc:
                publishing_path(self.db).unlink(missing_ok=True)  # a cut copy helps nobody and fills the disk
                if not self.watch.write_failed(exc):
                    raise
                return False
            self.last_publish = time.monotonic()
            if at is None:
                return False  # held open for writing elsewhere: publish said so, the next one tries again
            self.progress.published(at)
            return True
        finally:
            self._publishing.release()

    def publish_if_due(self) -> bool:
        """After a landing: publish when the last publish is old enough (FLEET_PUBLISH_SECONDS)."""
        return self.due() and self.publish(only_if_due=True)

    def phase(self, name: str) -> None:
        self.progress.phase(name)

    def close(self) -> None:
        self.watch.give_back()
        self.store.full_disk = None
        self.store.close()
        self.watch.close()  # after the store: its descriptor of the store must not drop DuckDB's lock


def _watch(db: str, run_id: str, staging: StagingArea) -> resources.Watch:
    """The run's resources (tasks/control/resources.py): its disks, its store and lock, its reserve."""
    settings = process_settings()
    watch = resources.watch(run_id, settings.min_free_mb)
    watch.place("working store", working_path(db))
    watch.place("staging", staging.root)
    watch.keep(working_path(db))
    watch.keep(runlock.lock_path(db))
    watch.set_aside(Path(str(db) + ".reserve"), int(settings.reserve_mb * resources.MB))
    return watch


_contexts: dict[str, RunContext] = {}  # by database (resolved path) and by run id


def _key(db: str | Path) -> str:
    return str(Path(db).resolve())


def current(run_id: str) -> RunContext:
    """The context of run `run_id`, held by this process; a task runs inside its flow's process."""
    try:
        return _contexts[run_id]
    except KeyError:
        raise RuntimeError(f"run {run_id} holds no database in this process (a task that needs the store "
                           "must run in the flow's process)") from None


class RunSession:
    """One hold on a database's lock; leaving the outermost one publishes, closes the store and releases."""

    def __init__(self, db: str, context: RunContext, outermost: bool, alias: str | None = None):
        self.db, self.context, self.outermost = db, context, outermost
        self.alias = alias  # a nested hold's own run id for the same context, forgotten when it is left

    @property
    def progress(self) -> ProgressFile:
        return self.context.progress

    def __enter__(self) -> "RunSession":
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if not self.outermost:
            if self.alias is not None:
                _contexts.pop(self.alias, None)
                resources.forget(self.alias)
            runlock.release(self.db)
            return
        context = self.context
        try:
            context.phase("publishing")
            halted = context.watch.halted
            context.publish()  # every run ends published, whatever its status, unless halted (resources.py)
            if kind is None and context.watch.halted and not halted:
                _unpublished(context)  # the disk filled while the last publish copied
        finally:
            _contexts.pop(_key(self.db), None)
            _contexts.pop(context.run_id, None)
            resources.forget(context.run_id)
            context.close()
            context.progress.remove()
            runlock.release(self.db)


def _unpublished(context: RunContext) -> None:
    """The run ended, but its last publish failed for want of space: recorded `failed` after all, and said so."""
    kind, reason = context.watch.halted or (resources.NO_SPACE, "")
    try:
        context.store.finish_run(context.run_id, "failed", message=reason)
    except Exception:  # noqa: BLE001 - the disk may refuse even that: the next run marks it interrupted
        pass
    raise resources.ResourceLost(reason, kind)


def publish_seconds_setting() -> float:
    """How old the last publish may get before a landing publishes again (FLEET_PUBLISH_SECONDS), read when
    the run starts; a value that cannot work was refused before the run."""
    return process_settings().publish_seconds


def hold_run(db: str | Path, run_id: str, command: str, *, wait: bool = False,
             say: Callable[[str], None] = _stderr) -> RunSession:
    """Take `db`'s lock for this run (see the module docstring); raises runlock.RunLocked if another run holds it."""
    db = str(db)

    def waiting(holder: runlock.Holder | None) -> None:
        who = holder.describe() if holder else "another run (starting up)"
        say(f"waiting for {who} to finish on {db} ...")

    outermost = runlock.acquire(db, run_id, command, wait=wait, on_wait=waiting, say=say)
    if not outermost:
        held = _contexts[_key(db)]
        alias = run_id if run_id not in _contexts else None  # a flow given its own id under a command's hold
        _contexts.setdefault(run_id, held)
        resources.alias(run_id, held.watch)
        return RunSession(db, held, False, alias)
    context: RunContext | None = None
    try:
        holder = runlock.held_here(db)
        progress_file = ProgressFile(db, run_id, command, holder.started if holder else "")
        context = RunContext(db, run_id, command, progress_file, publish_seconds_setting())
        context.store.execute("mark_interrupted_runs", now=datetime.now(timezone.utc))
        _contexts[_key(db)] = _contexts[run_id] = context
        if not Path(db).is_file():
            context.publish()  # analysts and `fleet status` have a file from the first minute
    except BaseException:
        _contexts.pop(_key(db), None)
        _contexts.pop(run_id, None)
        if context is not None:
            context.close()
        progress_path(db).unlink(missing_ok=True)
        runlock.release(db)
        raise
    return RunSession(db, context, True)


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
            db = option_argument(bound.arguments, "db")  # the flow's `db`, itself or in its `options`
            with hold_run(db, bound.arguments["run_id"], command, wait=True) as session:
                before = progress.current()
                progress.use(Tee(before, session.progress))
                try:
                    return fn(*bound.args, **bound.kwargs)
                finally:
                    progress.use(before)

        return run

    return wrap
