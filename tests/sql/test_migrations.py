"""Migrations are applied once, in order, recorded; an older database is upgraded on open."""

import shutil
from pathlib import Path

import duckdb
import pytest

from fleet_data.tasks.store.database import SQL_DIR, Database, DatabaseError, open_database


def test_fresh_database_applies_every_migration_once(tmp_path):
    path = tmp_path / "f.duckdb"
    first = Database(path)
    files = sorted((SQL_DIR / "migrations").glob("*.sql"))
    assert first.applied == [int(f.name[:4]) for f in files]
    first.close()
    second = Database(path)
    assert second.applied == []
    ledger = second.sql("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
    assert ledger["version"].to_list() == [int(f.name[:4]) for f in files]
    assert ledger["name"].to_list() == [f.stem[5:] for f in files]
    second.close()


def test_older_database_is_upgraded(tmp_path):
    only_first = tmp_path / "migrations_v1"
    only_first.mkdir()
    shutil.copy(SQL_DIR / "migrations" / "0001_runs_and_roster.sql", only_first)
    path = tmp_path / "old.duckdb"
    old = Database(path, migrations_dir=only_first, views_dir=tmp_path / "no_views")
    assert old.applied == [1]
    old.sql("SELECT 1")  # the old schema is usable
    old.connection.execute(
        "INSERT INTO vehicles (vin, run_id, fetched_at) VALUES ('1HGCM82633A004352', 'r0', now())"
    )
    old.close()
    with duckdb.connect(str(path)) as raw:
        tables = {r[0] for r in raw.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert "vehicles" in tables and "specs" not in tables

    upgraded = Database(path)
    assert upgraded.applied[0] == 2 and upgraded.applied == sorted(upgraded.applied)  # every later one, in order
    assert upgraded.schema_version() == max(upgraded.applied)
    assert upgraded.sql("SELECT vin FROM vehicles")["vin"].to_list() == ["1HGCM82633A004352"]
    assert "specs" in upgraded.sql("SELECT table_name FROM information_schema.tables")["table_name"].to_list()
    upgraded.close()


def test_failed_migration_rolls_back_and_is_not_recorded(tmp_path):
    bad = tmp_path / "migrations_bad"
    bad.mkdir()
    (bad / "0001_ok.sql").write_text("CREATE TABLE a (x INTEGER);\n")
    (bad / "0002_broken.sql").write_text("CREATE TABLE b (x INTEGER);\nCREATE TABLE broken (;\n")
    with pytest.raises(DatabaseError, match="0002_broken.sql"):
        Database(tmp_path / "bad.duckdb", migrations_dir=bad, views_dir=tmp_path / "none")
    with duckdb.connect(str(tmp_path / "bad.duckdb")) as raw:
        assert raw.execute("SELECT version FROM schema_migrations").fetchall() == [(1,)]
        tables = {r[0] for r in raw.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert "b" not in tables


def test_migration_names_are_checked(tmp_path):
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "init.sql").write_text("SELECT 1;\n")
    with pytest.raises(DatabaseError, match="NNNN_name.sql"):
        Database(tmp_path / "o.duckdb", migrations_dir=odd)


def test_one_database_per_process(tmp_path):
    path = tmp_path / "shared.duckdb"
    a = open_database(path)
    b = open_database(Path(str(path)))
    assert a is b
    a.close()
    assert b.sql("SELECT 1 AS one")["one"].to_list() == [1]  # still open for the other user
    b.close()
    c = open_database(path)
    assert c is not a
    c.close()


def test_named_queries_only_from_files(db):
    with pytest.raises(DatabaseError, match="no named query"):
        db.query("../bootstrap")
    with pytest.raises(DatabaseError, match="no named query"):
        db.query("does_not_exist")
