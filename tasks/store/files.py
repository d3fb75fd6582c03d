"""The files beside the published database (`--db`), named in one place.

  <db>                  the published snapshot
  <db>.working          the runs' store (and DuckDB's <db>.working.wal); only the lock holder opens it
  <db>.publishing       a snapshot being copied, renamed onto <db> once complete
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
    size = os.fstat(source).st_size
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        done = 0
        while done < size:
            piece = os.pread(source, min(1 << 20, size - done), done)
            if not piece:
                break
            while piece:
                written = os.write(out, piece)
                piece, done = piece[written:], done + written
    finally:
        os.close(out)


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
