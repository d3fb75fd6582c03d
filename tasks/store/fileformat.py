"""The DuckDB file format we write: one that every DuckDB analysts use can read.

DuckDB 2.0 writes its own storage version by default, which DuckDB 1.5 (the newest `duckdb-cli` on PyPI,
and the R, Node and JDBC/DBeaver clients, which lag the Python package) and the 1.4 LTS refuse: "Trying to
read a database file with version number 69, but we can only read versions between 64 and 68". So our
files are written in the v1.4.0 format, which every DuckDB from 1.4 on reads (docs/analysts.md):

- a working store is created in it (`CONFIG`), and DuckDB keeps a file's format when it later writes to
  it, so publishing stays a file copy (tasks/store/published.py) and the published file is in it too;
- a store an older version of this tool created in the 2.0 format is rewritten once, when opened
  (`rewrite`: every row read and written again, about 0.8 s for the sample fleet's 12 MB store).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb

STORAGE_VERSION = "v1.4.0"  # DuckDB 1.4 LTS and later read it; raise it only when 1.4 leaves LTS
CONFIG: dict[str, str | bool | int | float | list[str]] = {"storage_compatibility_version": STORAGE_VERSION}  # what a new file is written in
_READABLE = (1, 4, 0)


def catalog(connection: duckdb.DuckDBPyConnection) -> str:
    row = connection.execute("SELECT current_database()").fetchone()
    return str(row[0]) if row else "memory"


def readable_by_older_duckdb(connection: duckdb.DuckDBPyConnection, database: str | None = None) -> bool:
    """Whether `database` (the connection's own by default) is in a format DuckDB 1.4 reads."""
    row = connection.execute("SELECT tags FROM duckdb_databases() WHERE database_name = $name",
                             {"name": database or catalog(connection)}).fetchone()
    tag = (row[0] or {}).get("storage_version", "") if row else ""  # e.g. 'v1.4.0+': read by 1.4.0 and later
    found = re.match(r"v(\d+)\.(\d+)\.(\d+)", tag)
    if found is None:
        return True  # in memory, or a DuckDB that does not say: nothing to rewrite
    return tuple(int(n) for n in found.groups()) <= _READABLE


def copy_database(connection: duckdb.DuckDBPyConnection, target: Path) -> None:
    """Write the connection's database, whole (tables, views, macros, comments), into a new file `target`
    in the readable format. `target` must not exist."""
    source = catalog(connection).replace('"', '""')
    connection.execute(f"ATTACH $path AS fleet_format_copy (STORAGE_VERSION '{STORAGE_VERSION}')",
                       {"path": str(target)})
    try:
        connection.execute(f'COPY FROM DATABASE "{source}" TO fleet_format_copy')
    finally:
        connection.execute("DETACH fleet_format_copy")  # written out and closed: ready to copy or rename


def rewrite(path: Path) -> bool:
    """Rewrite a store written in DuckDB 2.0's own format in the readable one, in place; True when it was.

    Only the store's owner calls this, with nobody else holding the file (DuckDB refuses a second writer).
    """
    connection = duckdb.connect(str(path))
    rewriting = Path(str(path) + ".rewriting")
    try:
        if readable_by_older_duckdb(connection):
            return False
        rewriting.unlink(missing_ok=True)
        copy_database(connection, rewriting)
    finally:
        connection.close()  # checkpoints: the store's write-ahead log is folded in, and gone
    fd = os.open(rewriting, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    Path(str(path) + ".wal").unlink(missing_ok=True)  # the old file's log, if any: already in the copy
    os.replace(rewriting, path)
    return True


HEADER_BYTES = 3 * 4096  # DuckDB's main header and its two database headers, before the first block


def cut_short(connection: duckdb.DuckDBPyConnection, path: str | Path, database: str | None = None) -> str | None:
    """Why `database`'s file at `path` ends before a block it uses (a copy that died half-way), or None.

    DuckDB opens such a file and fails only when a query reads a block past the cut, which may be much later, or
    never for what a plan reads. The blocks in use are the catalog's (`pragma_metadata_info`) and every table's
    stored segments (`pragma_storage_info`): both read only metadata. Free blocks at the end may be cut: DuckDB
    itself leaves them out of the file.
    """
    name = database or catalog(connection)
    row = connection.execute("SELECT block_size FROM pragma_database_size() WHERE database_name = $name",
                             {"name": name}).fetchone()
    if row is None or not row[0]:
        return None
    tables = [t for (t,) in connection.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = $name AND schema_name = 'main'",
        {"name": name}).fetchall()]
    quoted = name.replace("'", "''")
    last = connection.execute(f"SELECT max(block_id) FROM pragma_metadata_info('{quoted}')").fetchone()
    blocks = [int(last[0])] if last and last[0] is not None else []
    for table in tables:  # names from the catalog, never from input
        target = f"{name}.main.{table}".replace("'", "''")
        used = connection.execute(
            f"SELECT max(block_id) FROM pragma_storage_info('{target}') WHERE persistent").fetchone()
        if used and used[0] is not None:
            blocks.append(int(used[0]))
    if not blocks:
        return None
    expected, found = HEADER_BYTES + (max(blocks) + 1) * int(row[0]), os.path.getsize(path)
    return f"the file has {found:,} bytes where its blocks need {expected:,}" if found < expected else None
