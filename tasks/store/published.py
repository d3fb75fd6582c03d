"""The published database and the working store beside it.

The file at `--db` (default `data/fleet.duckdb`) is what analysts, notebooks and BI tools open:
read-only, any number of them, at any time. No run ever writes it. Runs work in their own store
beside it and publish: CHECKPOINT the working store, copy it to a temporary file in the same
folder, fsync, and rename the copy onto `--db` (`os.replace`, atomic). A reader keeps the snapshot
it opened until it reconnects (on Linux the replaced file lives on while anyone holds it open).

All read-only access goes through here: `open_published` (status, report) and `read_only_view` (the dry
run's plan, which needs our schema over an older or absent file).

The files beside `--db`:
  <db>                  the published snapshot
  <db>.working          the runs' store (and DuckDB's <db>.working.wal); only the lock holder opens it
  <db>.publishing       a snapshot being copied, renamed onto <db> once complete
  <db>.lock             the run lock (tasks/run/lock.py)
  <db>.progress.json    what the live run is doing (tasks/run/progressfile.py)
"""

from __future__ import annotations

import contextlib
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import duckdb
import polars as pl

from tasks.store.database import QUERY_NAME, SQL_DIR, Database, DatabaseError, _bind, _read_sql, _statements, open_database
from tasks.store.files import _fsync, _wal, publishing_path


def publish(store: Database, db: str | Path) -> datetime:
    """Publish the working store `store` into `db` as one consistent snapshot; returns when.

    The copy is made under the store's lock, so no landing commits half-way through it; a file
    someone holds open is never written, only replaced.
    """
    target, temporary = Path(db), publishing_path(db)
    with store._lock:  # the Database's own lock: landings wait while the file is copied
        store.connection.execute("CHECKPOINT")
        wal = _wal(store.path)
        if wal.exists() and wal.stat().st_size:
            raise DatabaseError(f"{store.path}: the checkpoint left a write-ahead log behind; not published")
        shutil.copyfile(store.path, temporary)
    _fsync(temporary)
    # A log left by a version that wrote --db itself would be replayed into the new file by readers.
    _wal(target).unlink(missing_ok=True)
    os.replace(temporary, target)
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a power cut
    finally:
        os.close(directory)
    return datetime.now(timezone.utc)


def publish_file(db: str | Path) -> datetime:
    """Publish `db`'s working store outside any run (a database prepared by a tool or a test)."""
    with open_database(db) as store:
        return publish(store, db)


# Tables a plan made read-only keeps its own (the fleet file's roster is planned as read, never landed); every other
# table is the published one.
OWN_TABLES = ("vehicles", "rejected_rows", "schema_migrations")


@contextlib.contextmanager
def read_only_view(db_path: str | Path) -> Iterator[Database]:
    """An in-memory database with our schema whose tables (but OWN_TABLES) read the published `db_path`."""
    view = Database(":memory:")
    try:
        if Path(db_path).is_file():
            con = view.connection
            con.execute("ATTACH $path AS published (READ_ONLY)", {"path": str(db_path)})
            published = {row[0] for row in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = 'published' AND schema_name = 'main'"
            ).fetchall()}
            mine = {row[0] for row in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = 'memory' AND schema_name = 'main'"
            ).fetchall()}
            for table in sorted((published & mine) - set(OWN_TABLES)):  # names from the catalogs, not from input
                con.execute(f'DROP TABLE main."{table}"')
                con.execute(f'CREATE VIEW main."{table}" AS SELECT * FROM published.main."{table}"')
        yield view
    finally:
        view.close()


class Published:
    """A read-only connection to the published snapshot, with the named queries of `sql/queries/`.

    What read-only commands (`fleet status`) use: it never opens the working store, never writes.
    """

    def __init__(self, db: str | Path):
        self.path = str(db)
        try:
            self.connection = duckdb.connect(self.path, read_only=True)
        except duckdb.Error as exc:
            raise DatabaseError(f"{self.path}: cannot open the published database read-only ({exc})") from None
        self.connection.execute("SET TimeZone = 'UTC'")

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
