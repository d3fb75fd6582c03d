"""A database file cut short (a copy that died half-way) is refused when opened, wherever the cut falls.

DuckDB opens such a file and fails only when a query reads a block past the cut: an open that re-made every view
happened to read far enough, one that re-makes none (tests/sql/test_views_on_open.py) does not, and a plan may never
read there at all. The check compares the file's length with DuckDB's own count of its blocks
(tasks/store/fileformat.py `cut_short`).
"""

from __future__ import annotations

import shutil

import polars as pl
import pytest

from fleet_data.tasks.store.database import Database, DatabaseUnusable
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


def _cut(source, target, fraction: float) -> None:
    data = source.read_bytes()
    target.write_bytes(data[: int(len(data) * fraction)])


@pytest.mark.parametrize("fraction", [0.34, 0.6, 0.9, 0.99])
def test_a_working_store_cut_short_is_refused(whole, tmp_path, fraction):
    store = tmp_path / "fleet.duckdb.working"
    _cut(working_path(whole), store, fraction)
    with pytest.raises(DatabaseUnusable, match="damaged"):
        Database(store).close()


@pytest.mark.parametrize("fraction", [0.34, 0.6, 0.9, 0.99])
def test_a_published_file_cut_short_is_refused_by_readers_and_plans(whole, tmp_path, fraction):
    db = tmp_path / "fleet.duckdb"
    _cut(whole, db, fraction)
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
