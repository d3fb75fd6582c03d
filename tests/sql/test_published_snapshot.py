"""The published file is a snapshot we replace: nothing an analyst writes there is lost without a word.

Real DuckDB files, and a second process holding the published file open for writing as an analyst's tool
would. Analysts keep their own tables in their own database and attach ours read-only (README).
"""

from __future__ import annotations

import stat
import subprocess
import sys
import textwrap

import duckdb
import polars as pl
import pytest

from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.store.published import publish_file as publish

VINS = ["1HGCM82633A004352", "WBA3A5C56G0915102"]


@pytest.fixture
def published(tmp_path):
    db = tmp_path / "data" / "fleet.duckdb"
    with open_database(db) as store:
        store.start_run("refresh", ["fleet.csv"], {}, run_id="r1")
        store.land("vehicles", pl.DataFrame({"vin": VINS[:1]}), "r1")
    assert publish(db) is not None
    return db


def _land_another(db) -> None:
    with open_database(db) as store:
        store.land("vehicles", pl.DataFrame({"vin": VINS[1:]}), "r1")


def _vehicles(path) -> int:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.sql("SELECT count(*) FROM vehicles").fetchall()[0][0]


def test_the_published_file_is_read_only_and_reading_it_changes_nothing(published):
    assert stat.S_IMODE(published.stat().st_mode) == 0o444  # a read-write open fails for anyone but root
    with duckdb.connect(str(published), read_only=True) as con:
        con.sql("SELECT count(*) FROM vehicle_overview").fetchall()
    said: list[str] = []
    _land_another(published)
    assert publish(published, say=said.append) is not None
    assert said == [] and [p.name for p in published.parent.glob("*.changed-*")] == []
    assert _vehicles(published) == 2


def test_a_table_written_into_the_published_file_is_kept_aside_with_a_message(published):
    with duckdb.connect(str(published)) as con:  # root may open it read-write despite its mode
        con.execute("CREATE TABLE my_notes AS SELECT 'call the depot' AS note")
    _land_another(published)
    said: list[str] = []
    assert publish(published, say=said.append) is not None
    (aside,) = published.parent.glob("fleet.changed-*.duckdb")
    assert len(said) == 1 and str(aside) in said[0] and "READ_ONLY" in said[0]
    with duckdb.connect(str(aside), read_only=True) as con:
        assert con.sql("SELECT note FROM my_notes").fetchall() == [("call the depot",)]
    assert _vehicles(published) == 2  # the fresh snapshot is published all the same
    with duckdb.connect(str(published), read_only=True) as con:
        assert con.sql("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'my_notes'").fetchall() == [(0,)]


def test_a_file_held_open_for_writing_is_not_replaced(published):
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, duckdb
            con = duckdb.connect({str(published)!r})
            con.execute("CREATE TABLE my_notes AS SELECT 1 AS n")
            print("open", flush=True)
            sys.stdin.readline()
            con.close()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        _land_another(published)
        said: list[str] = []
        assert publish(published, say=said.append) is None
        assert len(said) == 1 and "open for writing" in said[0]
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=30)
    assert publish(published, say=said.append) is not None  # closed: kept aside, then published
    (aside,) = published.parent.glob("fleet.changed-*.duckdb")
    with duckdb.connect(str(aside), read_only=True) as con:
        assert con.sql("SELECT n FROM my_notes").fetchall() == [(1,)]
    assert _vehicles(published) == 2


def test_an_analysts_own_database_attaches_ours_read_only_and_survives_publishes(published, tmp_path):
    mine = tmp_path / "analysis.duckdb"
    with duckdb.connect(str(mine)) as con:
        con.execute(f"ATTACH '{published}' AS fleet (READ_ONLY)")
        con.execute("CREATE TABLE to_check AS SELECT vin FROM fleet.vehicle_overview")
        with pytest.raises(duckdb.Error, match="read-only"):
            con.execute("CREATE TABLE fleet.main.mine AS SELECT 1 AS n")
    _land_another(published)
    said: list[str] = []
    assert publish(published, say=said.append) is not None and said == []
    with duckdb.connect(str(mine)) as con:
        con.execute(f"ATTACH '{published}' AS fleet (READ_ONLY)")
        assert con.sql("SELECT count(*) FROM to_check").fetchall() == [(1,)]  # theirs, kept
        assert con.sql("SELECT count(*) FROM fleet.vehicles").fetchall() == [(2,)]  # ours, fresh
