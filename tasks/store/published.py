"""The published database and the working store beside it.

The file at `--db` (default `data/fleet.duckdb`) is what analysts, notebooks and BI tools open:
read-only, any number of them, at any time. No run ever writes it. Runs work in their own store
beside it and publish: CHECKPOINT the working store, copy it to a temporary file in the same
folder, fsync, and rename the copy onto `--db` (`os.replace`, atomic). The file a publish replaces is kept as
`<db>.previous` (a hard link), and the next publish, instead of copying the whole store, renames it to the
temporary name and writes into it only the blocks whose checksum differs from the store's
(`files.update_open_copy`): its cost follows what changed since that snapshot, two publishes back, not the file's
size. A kept snapshot someone may still read (a DuckDB connection holds its lock, or this process has it open)
is never written: it is unlinked, its reader keeps it, and that publish copies in full. The store, and so the copy, is in
the file format DuckDB 1.4 and later read, not DuckDB 2.0's own (tasks/store/fileformat.py): the CLI, R,
Node and DBeaver clients lag the Python package. A reader keeps the snapshot
it opened until it reconnects (on Linux the replaced file lives on while anyone holds it open).

The published file is a snapshot we replace, so nobody may keep anything in it: it is published read-only
(mode 0444: a read-write open by anyone but root fails, "Permission denied"), and a publish that finds it
changed since we published it (its size, mtime or inode differ from `<db>.published.json`, or a write-ahead
log lies beside it: someone wrote to it, root or a chmod) moves it aside to `<name>.changed-<UTC time>.duckdb`
and says so, instead of replacing it; one held open for writing right now is not replaced at all (the
publish is skipped with a message; the next one tries again). Analysts keep their own tables in their own
file and `ATTACH '<db>' AS fleet (READ_ONLY)` (README, "Your own tables").

All read-only access goes through here: `open_published` (status, report) and `read_only_view` (the dry
run's plan, which needs our schema over an older or absent file).

The files beside `--db`:
  <db>                  the published snapshot
  <db>.published.json   what the snapshot looked like when published (size, mtime, inode)
  <db>.working          the runs' store (and DuckDB's <db>.working.wal); only the lock holder opens it
  <db>.publishing       a snapshot being copied, renamed onto <db> once complete
  <db>.previous         the snapshot the last publish replaced, brought up to date by the next one
  <db>.lock             the run lock (tasks/run/lock.py)
  <db>.progress.json    what the live run is doing (tasks/run/progressfile.py)
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

try:
    import fcntl
except ImportError:  # not on Windows: there, a file held open cannot be replaced anyway
    fcntl = None  # type: ignore[assignment]

import duckdb
import polars as pl

from fleet_data.tasks.control.faults import as_fault, damaged_database
from fleet_data.tasks.store import fileformat
from fleet_data.tasks.store.database import (QUERY_NAME, SQL_DIR, Database, DatabaseError, DatabaseUnusable, _bind,
                                             _read_sql, damaged_published, _statements, open_database)
from fleet_data.tasks.store.files import (_fsync, _wal, copy_open_file, previous_path, publishing_path,
                                          update_open_copy)


def unusable_published(exc: duckdb.Error, db: str | Path) -> DatabaseError:
    """The published file could not be opened: a damaged file (the user's to fix, exit 2) or another failure."""
    if damaged_database(exc):
        return DatabaseUnusable(damaged_published(db))
    fault = as_fault(exc, db)
    if fault is not None:
        return DatabaseUnusable(str(fault))
    return DatabaseError(f"{db}: cannot open the published database read-only ({exc})")


def published_record_path(db: str | Path) -> Path:
    return Path(str(db) + ".published.json")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _fingerprint(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def changed_since_published(db: str | Path) -> bool:
    """Whether someone wrote to the published file since we published it (unknown, for a file published
    before this was recorded: False)."""
    target, record = Path(db), published_record_path(db)
    if not target.is_file() or not record.is_file():
        return False
    try:
        held = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    wal = _wal(target)
    return held != _fingerprint(target) or (wal.is_file() and wal.stat().st_size > 0)


def open_for_writing(db: str | Path) -> bool:
    """Whether another process holds the file open read-write (DuckDB locks it exclusively then; readers share)."""
    if fcntl is None or not Path(db).is_file():
        return False
    fd = os.open(db, os.O_RDONLY)
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # releases the probe's lock
    return False


def _move_aside(target: Path, say: Callable[[str], None]) -> Path:
    """Keep a published file someone wrote to, with its log, beside it under a name that says when."""
    aside = target.with_name(f"{target.stem}.changed-{datetime.now(timezone.utc):%Y%m%dT%H%M%S%fZ}{target.suffix}")
    os.replace(target, aside)
    if _wal(target).exists():
        os.replace(_wal(target), _wal(aside))
    aside.chmod(0o644)
    say(f"{target} was written to after it was published (a table created there, say); a publish replaces it, "
        f"so it is kept as {aside} and a fresh snapshot is published in its place. The published file is a "
        f"read-only snapshot: keep your own tables in your own database and ATTACH '{target}' AS fleet (READ_ONLY).")
    return aside


def publish(store: Database, db: str | Path, say: Callable[[str], None] = _stderr) -> datetime | None:
    """Publish the working store `store` into `db` as one consistent snapshot; returns when (None: not published).

    The copy is made under the store's lock, so no landing commits half-way through it; a file
    someone holds open is never written, only replaced. A published file someone wrote to is moved aside
    first, and one held open for writing is not replaced (the module docstring); `say` tells why.
    """
    target, temporary = Path(db), publishing_path(db)
    if open_for_writing(target):
        say(f"{target} is open for writing in another program: not replaced, so nothing written there is lost. "
            "Close it (and open it read-only: it is a snapshot we replace); the next publish goes ahead.")
        return None
    temporary.unlink(missing_ok=True)  # a cut publish's copy is read-only: never written into
    reusing = _take_previous(previous_path(target), target, temporary)
    with store._lock:  # the Database's own lock: landings wait while the file is copied
        store.connection.execute("CHECKPOINT")
        wal = _wal(store.path)
        if wal.exists() and wal.stat().st_size:
            raise DatabaseError(f"{store.path}: the checkpoint left a write-ahead log behind; not published")
        # The store is in the format DuckDB 1.4 and later read (tasks/store/fileformat.py): so is the copy.
        # Read through the store's descriptor, not by name: that would drop DuckDB's lock on the store.
        if reusing:
            ((block_size,),) = store.connection.execute("SELECT block_size FROM pragma_database_size()").fetchall()
            update_open_copy(store.reader, temporary, block_size)
        else:
            copy_open_file(store.reader, temporary)
    _fsync(temporary)
    temporary.chmod(0o444)  # a snapshot: opened read-only (a read-write open fails for all but root)
    if changed_since_published(target):
        _move_aside(target, say)
    elif target.is_file():
        _keep_as_previous(target, previous_path(target))
    # A log left by a version that wrote --db itself would be replayed into the new file by readers.
    _wal(target).unlink(missing_ok=True)
    os.replace(temporary, target)
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a power cut
    finally:
        os.close(directory)
    record = published_record_path(target)
    partial = record.with_name(record.name + ".tmp")
    partial.write_text(json.dumps(_fingerprint(target)), encoding="utf-8")
    os.replace(partial, record)
    return datetime.now(timezone.utc)


def _take_previous(previous: Path, target: Path, temporary: Path) -> bool:
    """Move the snapshot the last publish replaced to `temporary`, to be brought up to date, when nobody reads it;
    True when moved. One still read (a reader keeps the snapshot it opened) is unlinked instead: that reader keeps
    it, and this publish copies the whole file."""
    if not previous.is_file():
        return False
    if _nobody_reads(previous, target):
        os.replace(previous, temporary)
        return True
    previous.unlink(missing_ok=True)
    return False


def _nobody_reads(previous: Path, target: Path) -> bool:
    """Whether `previous` may be written: not the published file itself (a publish cut between its hard link and its
    rename leaves both names on one file), not open in this process, and locked by no DuckDB anywhere (a DuckDB
    connection locks its file, a read-only one shared)."""
    if not _reuse_possible():
        return False
    try:
        if target.exists() and os.path.samefile(previous, target):
            return False
        held = previous.stat()
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                mine = os.stat(f"/proc/self/fd/{fd}")
                if (mine.st_dev, mine.st_ino) == (held.st_dev, held.st_ino):
                    return False
        previous.chmod(0o644)  # published read-only; ours to write again
        probe = os.open(previous, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.lockf(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(probe)  # releases the probe's lock; no DuckDB of this process holds the file (above)
    return True


def _reuse_possible() -> bool:
    """Whether a kept snapshot can be known unread: a lock to probe and this process's descriptors to look at (not
    without /proc, as on macOS, nor on Windows: there every publish copies in full, and none is kept)."""
    return fcntl is not None and Path("/proc/self/fd").is_dir()


def _keep_as_previous(target: Path, previous: Path) -> None:
    """Keep the snapshot being replaced under a second name, for the next publish to bring up to date."""
    previous.unlink(missing_ok=True)
    if not _reuse_possible():
        return
    with contextlib.suppress(OSError):  # a file system without hard links: the next publish copies in full
        os.link(target, previous)


def publish_file(db: str | Path, say: Callable[[str], None] = _stderr) -> datetime | None:
    """Publish `db`'s working store outside any run (a database prepared by a tool or a test)."""
    with open_database(db) as store:
        return publish(store, db, say)


# Tables a plan made read-only keeps its own (the fleet file's roster is planned as read, never landed); every other
# table is the published one.
OWN_TABLES = ("vehicles", "rejected_rows", "schema_migrations")


@contextlib.contextmanager
def read_only_view(db_path: str | Path) -> Iterator[Database]:
    """An in-memory database with our schema whose tables (but OWN_TABLES) read the published `db_path`."""
    view = Database(":memory:", described=False)  # plans only: no comments to write
    try:
        if Path(db_path).is_file():
            con = view.connection
            try:
                con.execute("ATTACH $path AS published (READ_ONLY)", {"path": str(db_path)})
            except duckdb.Error as exc:
                raise unusable_published(exc, db_path) from None
            if fileformat.cut_short(con, db_path, "published"):
                raise DatabaseUnusable(damaged_published(db_path))
            published = {row[0] for row in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = 'published' AND schema_name = 'main'"
            ).fetchall()}
            mine = {row[0] for row in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = 'memory' AND schema_name = 'main'"
            ).fetchall()}
            for table in sorted((published & mine) - set(OWN_TABLES)):  # names from the catalogs, not from input
                missing = _columns_missing(con, table)  # a file published by an earlier version: NULL there
                con.execute(f'DROP TABLE main."{table}"')
                con.execute(f'CREATE VIEW main."{table}" AS SELECT *{missing} FROM published.main."{table}"')
        yield view
    finally:
        view.close()


def _columns_missing(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """`, CAST(NULL AS <type>) AS "<column>"` for each column our schema's `table` has and the published one lacks
    (added by a migration since the file was published): the plan's queries read them as unknown."""
    rows = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = 'memory' AND table_name = $t "
        "AND column_name NOT IN (SELECT column_name FROM duckdb_columns() WHERE database_name = 'published' "
        "AND table_name = $t) ORDER BY column_index", {"t": table}).fetchall()
    return "".join(f', CAST(NULL AS {kind}) AS "{name}"' for name, kind in rows)


class Published:
    """A read-only connection to the published snapshot, with the named queries of `sql/queries/`.

    What read-only commands (`fleet status`) use: it never opens the working store, never writes.
    """

    def __init__(self, db: str | Path):
        self.path = str(db)
        try:
            self.connection = duckdb.connect(self.path, read_only=True)
        except duckdb.Error as exc:
            raise unusable_published(exc, self.path) from None
        if fileformat.cut_short(self.connection, self.path):
            self.connection.close()
            raise DatabaseUnusable(damaged_published(self.path))
        self.connection.execute("SET TimeZone = 'UTC'")
        self.connection.execute("SET enable_progress_bar = false")  # a long read draws no bar into a command's output

    def query(self, name: str, **params: Any) -> pl.DataFrame:
        if not QUERY_NAME.match(name) or not (SQL_DIR / "queries" / f"{name}.sql").is_file():
            raise DatabaseError(f"no named query {name!r} in sql/queries/")
        statements = _statements(_read_sql("queries", f"{name}.sql"))
        for statement in statements[:-1]:
            self.connection.execute(statement, _bind(statement, params))
        last = statements[-1]
        return pl.from_arrow(self.connection.sql(last, params=_bind(last, params)).to_arrow_table())  # type: ignore[return-value]

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> "Published":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_published(db: str | Path) -> Published:
    return Published(db)
