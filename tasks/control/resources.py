"""What a run needs from its machine, checked, never assumed: disk space, and its store and lock staying put.

A run writes three places: the working store (`<db>.working`), the staging area (answer journals) and
the lake. Before each chunk and before publishing, `Watch.check` looks at the space left on each
(`shutil.disk_usage`) against `FLEET_MIN_FREE_MB`, and at the working store and the lock file: still
there, still the same file (inode) as when the run opened them. On a shortfall, or on any write that
fails for space (`is_disk_full`), the run is halted: its stops (tasks/control/stops.py) let no new call
start, whatever was fetched lands, and the run ends `failed` with the reason (exit code 6 for space, 7
for a store or lock gone; tasks/exitcodes.py).

Answers already paid for must still reach the disk when it fills: a run sets aside `FLEET_RESERVE_MB`
beside its working store when it starts (`<db>.reserve`), and gives it back the moment a write finds the
disk full, so the write that failed can be made again, and the landing and the run's record have room.

One watch per run, found by run id, like its stops; a process with no watch for a run (a `--workers`
fetch process) checks nothing: the flow's process does, at each landing.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

from fleet_data.tasks import exitcodes
from fleet_data.tasks.errors import FleetError
from fleet_data.tasks.control import stops

# The kinds of halt, each with its exit code (tasks/exitcodes.py). A lost service (tasks/control/services.py) leaves
# the store sound: that run still publishes what it landed.
NO_SPACE, STORE_LOST, SERVICE_LOST = "no_space", "store_lost", "service_lost"
CODES = {NO_SPACE: exitcodes.NO_SPACE, STORE_LOST: exitcodes.STORE_LOST, SERVICE_LOST: exitcodes.SERVICE_LOST}
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_FULL_WORDS = ("no space left on device", "disk quota exceeded")  # DuckDB's and Arrow's messages carry the OS's
MB = 1024 * 1024


class ResourceLost(FleetError):
    """The run cannot go on with what the machine gave it; `kind` says what (NO_SPACE, STORE_LOST, SERVICE_LOST), and
    the code."""

    def __init__(self, reason: str, kind: str = NO_SPACE):
        super().__init__(reason)
        self.reason, self.kind = reason, kind
        self.code = CODES[kind]

    def __reduce__(self) -> tuple[type, tuple[str, str]]:  # raised in a worker process, it reaches the flow whole
        return type(self), (self.reason, self.kind)


def full_disk_error(exc: BaseException | None) -> BaseException | None:
    """The write refused for want of space or quota in `exc` or what caused it, if there is one."""
    seen = 0
    while exc is not None and seen < 8:  # bounded: a cause chain may loop
        if isinstance(exc, ResourceLost):
            return exc if exc.kind == NO_SPACE else None
        if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
            return exc
        if any(words in str(exc).lower() for words in _FULL_WORDS):
            return exc.__cause__ if full_disk_error(exc.__cause__) else exc  # the innermost says it best
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def is_disk_full(exc: BaseException | None) -> bool:
    return full_disk_error(exc) is not None


def _existing(path: Path) -> Path:
    """`path`, or the nearest folder above it that exists (where it would be written)."""
    place = path.absolute()
    while not place.exists() and place != place.parent:
        place = place.parent
    return place


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def _megabytes(n: float) -> str:
    return f"{n / MB:.1f} MB"


@dataclass
class Watch:
    """One run's resources: the folders it writes, the files that must stay its own, its reserve."""

    run_id: str
    min_free: int  # bytes
    places: dict[str, Path] = field(default_factory=dict)  # what it is -> a path on its disk
    files: dict[Path, int] = field(default_factory=dict)  # file -> a descriptor of it, held open all run long
    reserve: Path | None = None
    halted: tuple[str, str] | None = None  # (kind, reason) of the first halt
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def place(self, what: str, path: str | Path | None) -> None:
        if path and "://" not in str(path):  # object storage has no disk of ours to look at
            self.places[what] = Path(path)

    def keep(self, path: str | Path) -> None:
        """`path` must stay the file it is now until the run ends. A descriptor is held open, so the file's
        inode cannot be reused by a new file of the same name: deleted, its link count is 0; replaced, the name
        leads to another inode. (Close it only after DuckDB closed the file: closing any descriptor of a file
        drops the process's POSIX locks on it, DuckDB's among them.)"""
        try:
            self.files[Path(path)] = os.open(path, os.O_RDONLY)
        except OSError:
            pass  # not there to begin with: nothing to compare against

    def close(self) -> None:
        for fd in self.files.values():
            os.close(fd)
        self.files.clear()

    def set_aside(self, path: Path, size: int) -> None:
        """Reserve `size` bytes at `path`, given back on a full disk; a disk without room for it gets none."""
        if size <= 0:
            return
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.posix_fallocate(fd, 0, size)
            finally:
                os.close(fd)
            self.reserve = path
        except OSError:
            path.unlink(missing_ok=True)  # the space check says what is short

    def give_back(self) -> bool:
        """Free the reserve (True if there was one to free)."""
        with self._lock:
            reserve, self.reserve = self.reserve, None
        if reserve is None:
            return False
        reserve.unlink(missing_ok=True)
        return True

    def short(self, needed: int = 0) -> str | None:
        """Why the space left is not enough (`needed` bytes more than the headroom on the store's disk), if it is not."""
        seen: set[int] = set()
        for what, path in self.places.items():  # the working store's first: its disk is the one `needed` is for
            place = _existing(path)
            try:
                device = os.stat(place).st_dev
            except OSError:
                continue
            if device in seen:
                continue
            seen.add(device)
            want = self.min_free + (needed if what == "working store" else 0)
            free = shutil.disk_usage(place).free
            if free < want:
                return (f"disk full: {_megabytes(free)} free for the {what} in {place}, {_megabytes(want)} needed "
                        "(FLEET_MIN_FREE_MB); free some space and run again: nothing paid is bought twice")
        return None

    def lost(self) -> str | None:
        """Which file the run holds was deleted or replaced since it took it, if one was."""
        for path, fd in self.files.items():
            held, now = os.fstat(fd), _inode(path)
            if held.st_nlink == 0 or now != held.st_ino:
                how = "deleted" if now is None else "replaced by another file"
                return (f"{path} was {how} during the run: stopped without publishing; what was fetched stays "
                        "staged for the next run")
        return None

    def check(self, needed: int = 0, publishing: bool = False) -> str | None:
        """Look now: the halt's reason if the run must stop (halting it), else None. `publishing`: whether the
        store can be published, which a lost service does not prevent."""
        if self.halted and not (publishing and self.halted[0] == SERVICE_LOST):
            return self.halted[1]
        lost = self.lost()
        if lost:
            return self.halt(lost, STORE_LOST)
        short = self.short(needed)
        return self.halt(short, NO_SPACE) if short else None

    def halt(self, reason: str, kind: str) -> str:
        with self._lock:
            self.halted = self.halted or (kind, reason)
            reason = self.halted[1]
        stops.for_run(self.run_id).halt(reason)
        return reason

    def write_failed(self, exc: BaseException) -> bool:
        """A write raised `exc`: if for want of space, halt the run and give back the reserve (True: try again)."""
        if not is_disk_full(exc):
            return False
        self.halt(self.short() or f"disk full: {' '.join(str(exc).split())[:200]}; free some space and run again: "
                                    "nothing paid is bought twice", NO_SPACE)
        self.give_back()
        return True


_guard = threading.Lock()
_runs: dict[str, Watch] = {}


def watch(run_id: str, min_free_mb: float) -> Watch:
    with _guard:
        _runs[run_id] = Watch(run_id, int(min_free_mb * MB))
        return _runs[run_id]


def for_run(run_id: str) -> Watch | None:
    """The run's watch in this process (None where the run's context is not: a worker process)."""
    with _guard:
        return _runs.get(run_id)


def alias(run_id: str, watched: Watch) -> None:
    """A nested hold's own run id for the same run."""
    with _guard:
        _runs.setdefault(run_id, watched)


def forget(*run_ids: str) -> None:
    with _guard:
        for run_id in run_ids:
            _runs.pop(run_id, None)


def check(run_id: str) -> str | None:
    """Before a chunk: the reason the run must stop, if it must (see `Watch.check`)."""
    watched = for_run(run_id)
    return watched.check() if watched else None


def write_failed(run_id: str, exc: BaseException) -> bool:
    """After a write raised `exc`: True when it was for space (the run is halted, its reserve given back)."""
    watched = for_run(run_id)
    if watched is None:
        return is_disk_full(exc)
    return watched.write_failed(exc)


def halt(run_id: str, reason: str, kind: str) -> str:
    """Halt the run for `reason` (its first halt's reason stays); a process without the run's watch halts its stops."""
    watched = for_run(run_id)
    if watched is None:
        stops.for_run(run_id).halt(reason)
        return reason
    return watched.halt(reason, kind)


def halted(run_id: str) -> tuple[str, str] | None:
    """(kind, reason) when the run was halted for its resources."""
    watched = for_run(run_id)
    return watched.halted if watched else None
