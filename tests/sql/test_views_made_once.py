"""Views, macros and their descriptions are made when an open needs them, not at every open (table schema_views):
a second open of the same database by the same code keeps them; one that lacks a view, or whose view files or
dictionary changed, makes them again."""

from __future__ import annotations

import shutil

import duckdb

from fleet_data.tasks.store.database import SQL_DIR, Database


def _made(path) -> list:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("SELECT fingerprint, created_at FROM schema_views").fetchall()


def _comment(path, view: str) -> str | None:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("SELECT comment FROM duckdb_views() WHERE view_name = $v", {"v": view}).fetchone()[0]


def test_a_second_open_keeps_the_views_it_finds(tmp_path):
    db = tmp_path / "fleet.duckdb"
    Database(db).close()
    first = _made(db)
    assert len(first) == 1 and _comment(db, "vin_status")
    Database(db).close()
    assert _made(db) == first  # not made again
    assert _comment(db, "vin_status")  # and still described


def test_a_dropped_view_or_a_changed_view_file_is_made_again(tmp_path):
    db = tmp_path / "fleet.duckdb"
    Database(db).close()
    first = _made(db)
    with duckdb.connect(str(db)) as con:
        con.execute("DROP VIEW vin_status")
    Database(db).close()
    assert _comment(db, "vin_status")  # back, described
    assert _made(db)[0][1] > first[0][1]

    views = tmp_path / "views"
    shutil.copytree(SQL_DIR / "views", views)
    extra = views / "99_extra.sql"
    extra.write_text("CREATE OR REPLACE VIEW extra_view AS SELECT 1 AS one;\n")
    Database(db, views_dir=views).close()
    made = _made(db)
    assert made[0][0] != first[0][0]
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT one FROM extra_view").fetchall() == [(1,)]
