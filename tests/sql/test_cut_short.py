"""A database file cut short (a copy that died half-way) is refused when opened, wherever the cut falls in the blocks
its catalog and tables use (free blocks at its end DuckDB itself leaves out of the file).

DuckDB opens such a file and fails only when a query reads a block past the cut: an open that re-made every view
happened to read far enough, one that re-makes none (tests/sql/test_views_on_open.py) does not, and a plan may never
read there at all. The check compares the file's length with the last block its catalog and tables use
(tasks/store/fileformat.py `cut_short`).
"""

from __future__ import annotations

import shutil

import duckdb
import polars as pl
import pytest

from fleet_data.tasks.store.database import Database, DatabaseUnusable
from fleet_data.tasks.store.fileformat import HEADER_BYTES
from fleet_data.tasks.store.files import working_path
from fleet_data.tasks.store.published import Published, publish_file, read_only_view

VIN = "1HGCM82633A004352"


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """A published database and its working store, whole."""
    db = tmp_path_factory.mktemp("whole") / "fleet.duckdb"
    with Database(working_path(db)) as store:
        run = store.start_run("refresh", ["fleet.csv"], {})
        store.land("vehicles", pl.DataFrame({"vin": [VIN], "unit_number": ["U-1"]}), run)
    publish_file(db)
    return db


CUTS = ["a third", "two thirds", "into the last block a table uses"]


def _cut(source, target, where: str) -> None:
    data = source.read_bytes()
    if where == "into the last block a table uses":
        with duckdb.connect(str(source), read_only=True) as con:
            last = max(con.execute(f"SELECT coalesce(max(block_id), -1) FROM pragma_storage_info('{table}') "
                                   "WHERE persistent").fetchone()[0]
                       for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall())
        assert last >= 0
        end = HEADER_BYTES + last * 262_144 + 1_000
    else:
        end = len(data) // 3 * (1 if where == "a third" else 2)
    target.write_bytes(data[:end])


@pytest.mark.parametrize("where", CUTS)
def test_a_working_store_cut_short_is_refused(whole, tmp_path, where):
    store = tmp_path / "fleet.duckdb.working"
    _cut(working_path(whole), store, where)
    with pytest.raises(DatabaseUnusable, match="damaged"):
        Database(store).close()


@pytest.mark.parametrize("where", CUTS)
def test_a_published_file_cut_short_is_refused_by_readers_and_plans(whole, tmp_path, where):
    db = tmp_path / "fleet.duckdb"
    _cut(whole, db, where)
    with pytest.raises(DatabaseUnusable, match="damaged"):
        Published(db).close()
    with pytest.raises(DatabaseUnusable, match="damaged"):
        with read_only_view(db):
            pass


def test_whole_files_are_not_taken_for_cut_ones(whole, tmp_path):
    copy = tmp_path / "fleet.duckdb"
    shutil.copy(whole, copy)
    Published(copy).close()
    with read_only_view(copy) as view:
        assert view.connection.execute("SELECT count(*) FROM runs").fetchone() == (1,)
    with Database(working_path(whole)) as store:  # opened again: views as made, nothing written, still whole
        assert store.connection.execute("SELECT count(*) FROM vehicles").fetchone() == (1,)
