"""An open re-creates the views (and writes their comments) only when what they are made from changed: their files,
the dictionary, the migrations applied; or when one of them is gone. Every command opens the store, and re-making
some 30 views and 400 comments was half the cost of an open."""

from __future__ import annotations

from pathlib import Path

import duckdb

from fleet_data.tasks.store.database import Database


def _schema(tmp_path: Path) -> tuple[Path, Path]:
    """A migration with a table that counts the runs of the views file, and that views file."""
    migrations, views = tmp_path / "migrations", tmp_path / "views"
    migrations.mkdir()
    views.mkdir()
    (migrations / "0001_opens.sql").write_text("CREATE TABLE opens (n INTEGER);\n")
    (views / "01_probe.sql").write_text("INSERT INTO opens (n) VALUES (1);\nCREATE OR REPLACE VIEW probe AS SELECT 1 AS one;\n")
    return migrations, views


def _made(path: Path, migrations: Path, views: Path) -> int:
    """Open the store once; how many times its views file has run in all."""
    with Database(path, migrations_dir=migrations, views_dir=views) as db:
        return int(db.connection.execute("SELECT count(*) FROM opens").fetchone()[0])  # type: ignore[index]


def test_views_are_made_again_only_when_what_they_are_made_from_changed(tmp_path):
    migrations, views = _schema(tmp_path)
    path = tmp_path / "store.duckdb"
    assert [_made(path, migrations, views) for _ in range(3)] == [1, 1, 1]

    (views / "01_probe.sql").write_text("INSERT INTO opens (n) VALUES (1);\nCREATE OR REPLACE VIEW probe AS SELECT 2 AS one;\n")
    assert _made(path, migrations, views) == 2  # a views file edited
    with Database(path, migrations_dir=migrations, views_dir=views) as db:
        assert db.connection.execute("SELECT one FROM probe").fetchall() == [(2,)]

    (migrations / "0002_more.sql").write_text("ALTER TABLE opens ADD COLUMN seen_at TIMESTAMPTZ;\n")
    assert _made(path, migrations, views) == 3  # a migration applied: a view's columns may have changed

    with duckdb.connect(str(path)) as raw:
        raw.execute("DROP VIEW probe")
    assert _made(path, migrations, views) == 4  # a view gone
    assert _made(path, migrations, views) == 4


def test_a_store_opened_again_has_every_view_and_comment(tmp_path):
    path = tmp_path / "fleet.duckdb"
    with Database(path) as first:
        views = first.connection.execute("SELECT view_name, comment FROM duckdb_views() WHERE NOT internal "
                                         "AND schema_name = 'main' ORDER BY 1").fetchall()
    with duckdb.connect(str(path)) as raw:
        raw.execute("DROP VIEW vin_status")
    with Database(path) as again:
        assert again.connection.execute("SELECT view_name, comment FROM duckdb_views() WHERE NOT internal "
                                        "AND schema_name = 'main' ORDER BY 1").fetchall() == views
    assert len(views) > 15 and all(comment for _, comment in views)


def test_a_database_that_only_plans_is_not_described():
    with Database(":memory:", described=False) as scratch:
        comments = scratch.connection.execute("SELECT count(comment) FROM duckdb_columns() WHERE schema_name = 'main'")
        assert comments.fetchone() == (0,)
        assert scratch.connection.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'vin_status'"
                                          ).fetchone() == (1,)
