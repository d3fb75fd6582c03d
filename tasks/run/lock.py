"""One run at a time per database: an OS lock on `<db>.lock`, held for the whole run.

`fcntl.flock` on the file, exclusive: the kernel drops it when its process ends, `kill -9`
included, so a lock is never left behind by a dead run; the file's content (one JSON line: PID,
run id, command, start time) only says who holds it, for the message a second run prints and for
`fleet status`. The file is never deleted (a run waiting on the old file while a new one is created
would make two holders); a run that ends cleanly empties it, so a non-empty file found free names a
run whose process died, which the new holder says in one line.

Re-entrant within a process: the `fleet` command takes it before starting Prefect, then the flow
takes it again (a no-op); a flow started by `fleet serve` or a worker takes it itself.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import threading
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from fleet_data.tasks.errors import FleetError
from fleet_data.tasks.exitcodes import BUSY

EX_TEMPFAIL = 75  # sysexits.h: "temporary failure, try again later": another run holds the database


def lock_path(db: str | Path) -> Path:
    return Path(str(db) + ".lock")


@dataclass(frozen=True)
class Holder:
    """Who holds (or last held) a database's lock, as its lock file says."""

    pid: int
    run_id: str
    command: str
    started: str  # ISO 8601, UTC

    def describe(self) -> str:
        return f"run {self.run_id} ({self.command}, pid {self.pid}) since {self.started}"


class RunLocked(FleetError):
    """Another live run holds the database; the message says who, since when and what to do."""

    code = BUSY

    def __init__(self, db: str | Path, holder: Holder | None):
        self.db, self.holder = str(db), holder
        who = holder.describe() if holder else "another run (starting up)"
        super().__init__(f"{db} is in use by {who}; wait for it to finish, or run again with --wait "
                         "to queue behind it")


def read_holder(db: str | Path) -> Holder | None:
    """What the lock file says (None when empty, missing or unreadable); it does not say whether the lock is held."""
    try:
        data = json.loads(lock_path(db).read_text(encoding="utf-8") or "null")
        return Holder(int(data["pid"]), str(data["run_id"]), str(data["command"]), str(data["started"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process, alive
    return True


def holding_pids(db: str | Path) -> set[int] | None:
    """PIDs holding the lock, from /proc/locks (Linux), without touching the lock; None when unknown."""
    try:
        inode = os.stat(lock_path(db)).st_ino
        table = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    pids = set()
    for line in table.splitlines():
        # "4: FLOCK  ADVISORY  WRITE 9045 fe:00:2146726 0 EOF"; waiters carry "->" and hold nothing.
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[3] == "WRITE" and "->" not in fields:
            if fields[5].rsplit(":", 1)[-1] == str(inode) and fields[4].isdigit():
                pids.add(int(fields[4]))
    return pids


def holds(db: str | Path, pid: int) -> bool:
    """Whether the process `pid` is alive and holds the lock (as far as this system can tell)."""
    if not pid_alive(pid):
        return False
    pids = holding_pids(db)
    if pids is None:  # no /proc/locks: trust the lock file
        holder = read_holder(db)
        return holder is not None and holder.pid == pid
    return pid in pids


@dataclass
class _Held:
    fd: int
    holder: Holder
    depth: int = 1


_held: dict[str, _Held] = {}
_guard = threading.Lock()


def _key(db: str | Path) -> str:
    return str(lock_path(db).resolve())


def held_here(db: str | Path) -> Holder | None:
    """The holder if this process holds the lock of `db`."""
    with _guard:
        held = _held.get(_key(db))
        return held.holder if held else None


def _locked_fd(path: Path, wait: bool, on_wait: Callable[[Holder | None], None] | None, db: str | Path) -> int:
    """An open descriptor of `path`, flock'ed exclusively; raises RunLocked when held and not waiting."""
    told = False
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                if not wait:
                    raise RunLocked(db, read_holder(db)) from None
                if not told and on_wait:
                    on_wait(read_holder(db))
                    told = True
                fcntl.flock(fd, fcntl.LOCK_EX)  # queued: blocks until the holder ends (Ctrl-C still works)
            # The file locked must still be the one at `path` (a user may have deleted it meanwhile).
            try:
                if os.fstat(fd).st_ino == os.stat(path).st_ino:
                    return fd
            except FileNotFoundError:
                pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def acquire(db: str | Path, run_id: str, command: str, *, wait: bool = False,
            on_wait: Callable[[Holder | None], None] | None = None,
            say: Callable[[str], None] | None = None) -> bool:
    """Take the lock of `db` for this run; True when this call took it (False: this process held it already).

    Raises RunLocked when another process holds it, unless `wait`: then `on_wait(holder)` is told
    once and the call blocks until the lock is free.
    """
    key = _key(db)
    with _guard:
        held = _held.get(key)
        if held is not None:
            held.depth += 1
            return False
    path = lock_path(db)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _locked_fd(path, wait, on_wait, db)
    previous = read_holder(db)
    if previous is not None and previous.pid != os.getpid() and say:
        # flock is free, so its holder is gone; still check, and say what happened.
        fate = "that process is gone" if not pid_alive(previous.pid) else \
            f"pid {previous.pid} is running but no longer holds the lock (its file was replaced?)"
        say(f"took over the lock of {previous.describe()}: {fate}")
    holder = Holder(os.getpid(), run_id, command, datetime.now(timezone.utc).isoformat(timespec="seconds"))
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(asdict(holder)) + "\n").encode(), 0)
    with _guard:
        _held[key] = _Held(fd, holder)
    return True


def release(db: str | Path) -> None:
    """Give back one hold; the last one empties the file (a clean end) and unlocks it."""
    key = _key(db)
    with _guard:
        held = _held.get(key)
        if held is None:
            return
        held.depth -= 1
        if held.depth > 0:
            return
        del _held[key]
    try:
        os.ftruncate(held.fd, 0)
    finally:
        fcntl.flock(held.fd, fcntl.LOCK_UN)
        os.close(held.fd)
