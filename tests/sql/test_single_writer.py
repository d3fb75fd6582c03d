"""One writer: one connection per process, threads serialised, a second process refused clearly."""

import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from fleet_data.tasks.store.database import open_database

ROOT = Path(__file__).resolve().parents[2]


def test_threads_share_the_one_connection(tmp_path):
    db = open_database(tmp_path / "f.duckdb")
    chunks = [
        pl.DataFrame({"call_id": [f"c{k}-{i}" for i in range(50)], "endpoint": "/specs", "units": 1})
        for k in range(8)
    ]

    def land(chunk: pl.DataFrame) -> int:
        with open_database(tmp_path / "f.duckdb") as mine:  # the same Database, shared
            assert mine is db
            return mine.land("api_calls", chunk, "r1")

    with ThreadPoolExecutor(4) as pool:
        assert sum(pool.map(land, chunks)) == 400
    assert db.sql("SELECT count(*) AS n, sum(units) AS u FROM api_calls").rows() == [(400, 400)]
    db.close()


def test_second_process_is_refused_with_a_clear_message(tmp_path):
    path = tmp_path / "held.duckdb"
    db = open_database(path)
    script = textwrap.dedent(
        f"""
        from fleet_data.tasks.store.database import DatabaseError, open_database
        try:
            open_database({str(path)!r})
        except DatabaseError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    db.close()
    assert "cannot open the database, another process may hold it" in out.stdout
    assert str(path) in out.stdout


def test_a_run_whose_process_died_is_marked_interrupted_when_the_next_run_takes_the_lock(tmp_path):
    from fleet_data.tasks.run.context import hold_run

    path = tmp_path / "f.duckdb"
    died = textwrap.dedent(f"""
        import os
        from fleet_data.tasks.store.database import open_database
        db = open_database({str(path)!r})
        db.start_run("refresh", ["fleet.csv"], run_id="died")
        db.start_run("refresh", ["fleet.csv"], run_id="finished")
        db.finish_run("finished", "completed")
        db.connection.close()
        os._exit(0)  # like kill -9: nothing after this runs
    """)
    subprocess.run([sys.executable, "-c", died], cwd=ROOT, check=True, timeout=60)
    with open_database(path) as db:  # opening proves nothing about who is alive: nothing is marked
        assert dict(db.sql("SELECT run_id, status FROM runs").rows()) == {"died": "running", "finished": "completed"}
    with hold_run(str(path), "live", "refresh"):  # holding the lock, no other run can be alive
        with open_database(path) as db:
            db.start_run("refresh", ["fleet.csv"], run_id="live")
        with open_database(path) as db:  # closed and opened again: this run is left alone
            statuses = dict(db.sql("SELECT run_id, status FROM runs").rows())
            assert statuses == {"died": "interrupted", "finished": "completed", "live": "running"}
            assert db.sql("SELECT message FROM runs WHERE run_id = 'died'").item().startswith("the process stopped")
