"""The files beside the published database (`--db`), named in one place.

  <db>                  the published snapshot
  <db>.working          the runs' store (and DuckDB's <db>.working.wal); only the lock holder opens it
  <db>.publishing       a snapshot being copied, renamed onto <db> once complete
  <db>.previous         the snapshot the last publish replaced, brought up to date by the next (tasks/store/published.py)
  <db>.lock             the run lock (tasks/run/lock.py)
  <db>.progress.json    what the live run is doing (tasks/run/progressfile.py)
  <db>.reserve          room set aside while a run runs, freed when the disk fills (tasks/control/resources.py)
"""

from __future__ import annotations

import os
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path


def working_path(db: str | Path) -> Path:
    return Path(str(db) + ".working")


def publishing_path(db: str | Path) -> Path:
    return Path(str(db) + ".publishing")


def previous_path(db: str | Path) -> Path:
    return Path(str(db) + ".previous")


def _wal(path: str | Path) -> Path:
    return Path(str(path) + ".wal")  # where DuckDB keeps a file's write-ahead log


def exists(db: str | Path) -> bool:
    """Whether there is a database at `db`: published, or only a working store so far."""
    return Path(db).is_file() or working_path(db).is_file()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_open_file(source: int, target: Path) -> None:
    """Copy the file open at descriptor `source` into `target`, without opening the source by its name: a
    descriptor of DuckDB's file opened and closed here would drop DuckDB's lock on it (tasks/store/database.py)."""
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _copy_range(source, out, 0, os.fstat(source).st_size)
    finally:
        os.close(out)


# DuckDB's file: a 4 KiB main header and two 4 KiB database headers, then blocks, each starting with the 8-byte
# checksum of the rest of it (DuckDB checks it on every read).
MAIN_HEADER = 4096  # written when the file is made: its version and layout
HEADERS = 3 * MAIN_HEADER
CHECKSUM = 8


def update_open_copy(source: int, target: Path, block_size: int) -> int:
    """Make `target`, an older copy of the DuckDB file open at descriptor `source`, equal to it by writing only the
    blocks whose checksum differs (and the headers, and what lies past the old end); returns the bytes written.

    A block's checksum covers the rest of the block, so an unchanged checksum is an unchanged block (up to a 64-bit
    hash's collision, the odds DuckDB's own checks take): the cost follows what changed, not the file's size.
    """
    size = os.fstat(source).st_size
    out = os.open(target, os.O_RDWR)
    try:
        old_size = os.fstat(out).st_size
        if os.pread(out, MAIN_HEADER, 0) != os.pread(source, MAIN_HEADER, 0):
            old_size = 0  # another layout or version of DuckDB's file: no block of it is trusted
        os.ftruncate(out, size)
        written = _copy_range(source, out, 0, min(HEADERS, size))
        for at in range(HEADERS, size, block_size):
            length = min(block_size, size - at)
            if length < block_size or at + length > old_size or os.pread(source, CHECKSUM, at) != os.pread(out, CHECKSUM, at):
                written += _copy_range(source, out, at, length)
        return written
    finally:
        os.close(out)


def _copy_range(source: int, out: int, at: int, length: int) -> int:
    done = 0
    while done < length:
        piece = os.pread(source, min(1 << 20, length - done), at + done)
        if not piece:
            raise OSError(f"the file ended at byte {at + done} while it was copied")
        view = memoryview(piece)
        while view:
            count = os.pwrite(out, view, at + done)
            view, done = view[count:], done + count
    return done


def seed_working(db: str | Path) -> bool:
    """Start the working store from the published file when there is none (a database from before
    the working store existed, or one whose working store was removed). True when seeded."""
    published, working = Path(db), working_path(db)
    if working.exists() or not published.is_file():
        return False
    _wal(working).unlink(missing_ok=True)  # a log without its file belongs to nothing
    if _wal(published).exists():  # written by a version that wrote --db itself: replayed on open
        shutil.copyfile(_wal(published), _wal(working))
    seeding = Path(str(working) + ".seeding")
    shutil.copyfile(published, seeding)
    _fsync(seeding)
    os.replace(seeding, working)
    return True


def new_run_id() -> str:
    """A run's id: when it started (UTC, sortable) and six random hex digits."""
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
