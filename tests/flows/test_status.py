"""`fleet status` reads a database built here row by row and reports exactly what is in it,
without a service and without Prefect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pytest

from fleet_data.flows.cli import main
from fleet_data.flows.status import month_start
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.ingest.fleet_files import read_fleet
from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.store.published import publish_file as publish

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def db_path(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("status")
    csv = folder / "fleet.csv"
    csv.write_text("".join((ROOT / "data" / "sample_fleet.csv").read_text().splitlines(keepends=True)[:5]))
    roster = read_fleet([str(csv)])
    path = str(folder / "fleet.duckdb")
    now = max(datetime.now(timezone.utc), month_start() + timedelta(minutes=10))  # "this month" even at 00:00 on the 1st
    last_month = month_start(now) - timedelta(days=2)
    with open_database(path) as db:
        db.start_run("refresh", [str(csv)], run_id="run-a", started_at=last_month)
        db.land_chunk({"vehicles": roster.roster}, "run-a")
        db.finish_run("run-a", "completed", counts=roster.summary(), units_used=10, finished_at=last_month + timedelta(seconds=42))
        vins = sorted(db.query("roster_vins")["vin"].to_list())
        db.land("api_calls", _calls([("/specs", 200, 1)] * 5, last_month), "run-a")

        db.start_run("refresh", [str(csv)], run_id="run-b", started_at=now - timedelta(minutes=5))
        db.land("api_calls", _calls([("/specs", 200, 1)] * 3 + [("/v2/marketvalue", 200, 1), ("/v2/marketvalue", 404, 0)],
                                    now - timedelta(minutes=4)), "run-b")
        db.land("fetch_status", _answered([(v, "specs", "found") for v in vins[:3]], now), "run-b")
        failure = {"status": 502, "message": "Could not fetch data", "attempts": 1, "fetched_at": now - timedelta(minutes=4)}
        db.land("failures", staging.failures_frame([
            {**failure, "vin": vins[3], "dataset": "specs", "retryable": True},
            {**failure, "vin": vins[1], "dataset": "history", "retryable": False},
            {**failure, "vin": vins[0], "dataset": "market_value", "retryable": True},  # resolved by its no_data below
        ]), "run-b")
        db.land("fetch_status", _answered([(vins[0], "market_value", "no_data")], now), "run-b")
        db.land("left_pending", pl.DataFrame({"vin": [vins[2]], "dataset": ["lien_theft"], "reason": ["retry window closed"],
                                              "run_started_at": [now - timedelta(minutes=5)],
                                              "fetched_at": [now - timedelta(minutes=3)]}), "run-b")
        db.land("recall_batches", pl.DataFrame([
            {"batch_id": "rb_processing", "status": "processing", "submitted_at": now, "total_vins": 4, "vins_count": 4,
             "processed_vins": 1, "fetched_at": now},
            {"batch_id": "rb_done", "status": "completed", "submitted_at": last_month, "total_vins": 4, "vins_count": 4,
             "processed_vins": 4, "fetched_at": last_month},
        ]), "run-b")
        db.finish_run("run-b", "partial", finished_at=now - timedelta(minutes=3))
        db.start_run("backfill", [], run_id="run-c", started_at=now - timedelta(minutes=1))  # its process died
    publish(path)  # what analysts and `fleet status` read; the runs write beside it
    return path


def _answered(rows: list[tuple[str, str, str]], at: datetime) -> pl.DataFrame:
    return pl.DataFrame([{"vin": v, "dataset": d, "outcome": o, "fetched_at": at} for v, d, o in rows],
                        schema={"vin": pl.String, "dataset": pl.String, "outcome": pl.String, "fetched_at": staging.TS})


def _calls(calls: list[tuple[str, int, int]], at: datetime) -> pl.DataFrame:
    return pl.DataFrame([{"call_id": f"{at.timestamp()}-{i}", "endpoint": e, "method": "GET", "status": s, "units": u,
                          "attempt": 1, "fetched_at": at} for i, (e, s, u) in enumerate(calls)])


def test_status_reports_runs_units_pending_failed_and_batches(db_path, capsys):
    assert main(["status", "--db", db_path, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)

    assert [(r["run_id"], r["kind"], r["status"], r["units"], r["calls"]) for r in status["runs"]] == [
        ("run-c", "backfill", "interrupted", 0, 0), ("run-b", "refresh", "partial", 4, 5),
        ("run-a", "refresh", "completed", 10, 5)]
    assert status["live_run"] is None
    assert status["runs"][2]["valid"] == 4
    # This calendar month only: last month's five /specs calls are not in it.
    # A 404 "no data" is an answer, not a failed call.
    assert [(r["endpoint"], r["calls"], r["units"], r["failed_calls"], r["no_data_calls"])
            for r in status["units_this_month"]] == [("/specs", 3, 3, 0, 0), ("/v2/marketvalue", 2, 1, 0, 1)]
    assert status["units_this_month_total"] == 4
    # Per dataset, the view vin_status counted: (VINs, answered, no data, pending, failed, retryable, never asked).
    by_dataset = {r["dataset"]: (r["vins"], r["answered"], r["no_data"], r["pending"], r["failed"], r["failed_retryable"],
                                 r["never_asked"]) for r in status["datasets"]}
    assert by_dataset == {
        "specs": (4, 3, 0, 0, 1, 1, 0), "market_value": (4, 0, 1, 0, 0, 0, 3), "history": (4, 0, 0, 0, 1, 0, 3),
        "lien_theft": (4, 0, 0, 1, 0, 0, 3), "recalls": (4, 0, 0, 0, 0, 0, 4),
    }
    assert [(p["dataset"], p["vins"], p["reason"], p["since_run_id"]) for p in status["pending"]] == [
        ("lien_theft", 1, "retry window closed", "run-b")]
    assert sorted((f["dataset"], f["vins"], f["http_status"], f["retryable"]) for f in status["failed"]) == [
        ("history", 1, 502, False), ("specs", 1, 502, True)]
    assert [(b["batch_id"], b["status"], b["processed_vins"]) for b in status["recall_batches_in_flight"]] == [
        ("rb_processing", "processing", 1)]


def test_status_as_tables(db_path, capsys):
    assert main(["status", "--db", db_path, "--runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "4 units, 5 calls" in out
    assert "run-c" in out and "run-b" in out and "run-a" not in out
    assert "rb_processing" in out and "rb_done" not in out
    assert "/v2/marketvalue" in out
    assert "no data" in out
    assert "retry window closed" in out and "never asked" in out


def test_missing_database_is_an_error_and_is_not_created(tmp_path, capsys):
    missing = tmp_path / "nowhere.duckdb"
    assert main(["status", "--db", str(missing)]) == 2
    assert "no such database" in capsys.readouterr().err
    assert not missing.exists()


def test_status_needs_no_prefect_and_no_service(db_path):
    script = ("import sys; from flows.cli import main; code = main(['status', '--db', sys.argv[1], '--json']); "
              "assert 'prefect' not in sys.modules, 'prefect imported'; sys.exit(code)")
    env = {**os.environ, "PREFECT_API_URL": "http://127.0.0.1:9/api", "VDS_BASE_URL": "http://127.0.0.1:9"}
    done = subprocess.run([sys.executable, "-c", script, db_path], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["units_this_month_total"] == 4


HOLDER = """
import sys, time
from fleet_data.tasks.run.context import hold_run
from fleet_data.tasks.store.database import open_database
session = hold_run(sys.argv[1], "run-live", "refresh")
store = open_database(sys.argv[1])            # the working store, held read-write all along
store.start_run("refresh", [], run_id="run-live")
session.progress.start("specs", "Fetching specs", 40)
session.progress.advance("specs", 7)
session.progress.write(force=True)
print("holding", flush=True)
time.sleep(120)
"""


def test_status_reads_the_published_file_and_the_progress_file_only(db_path, capsys):
    """A live run holds the lock and the working store: status still answers, shows it live, writes nothing."""
    published = Path(db_path).read_bytes()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, db_path], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding", holder.stderr.read()
        done = subprocess.run([sys.executable, "-m", "fleet_data.flows.cli", "status", "--db", db_path, "--json"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        status = json.loads(done.stdout)
        live = status["live_run"]
        assert (live["run_id"], live["pid"], live["command"]) == ("run-live", holder.pid, "refresh")
        assert live["datasets"]["specs"] == {"description": "Fetching specs", "done": 7, "total": 40}
        # run-c's process is gone: shown interrupted, but nothing was written to say so.
        assert {r["run_id"]: r["status"] for r in status["runs"]}["run-c"] == "interrupted"
        tables = subprocess.run([sys.executable, "-m", "fleet_data.flows.cli", "status", "--db", db_path], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=60)
        assert "Running now: run run-live (refresh, pid" in tables.stdout and "specs 7/40" in tables.stdout
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert Path(db_path).read_bytes() == published

    # Its process killed, the run is no longer live; the progress file it left does not say otherwise.
    assert Path(db_path + ".progress.json").exists()
    assert main(["status", "--db", db_path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["live_run"] is None


def test_no_data_answers_from_the_service_are_not_failed_calls(tmp_path, monkeypatch):
    """Against the sandbox: a VIN it has no data for (404) and one that keeps failing (502)."""
    import asyncio

    from fleet_data.connectors import RetryPolicy, Settings
    from fleet_data.connectors.sandbox import run_sandbox
    from fleet_data.flows.status import fleet_status
    from fleet_data.tasks.fetch.enrich import fetch_chunk
    from fleet_data.tasks.land.landing import land_enrichment

    found, gone, broken = "1HGCM82633A004352", "1HGCM82633A004363", "1HGCM82693A000502"
    path = str(tmp_path / "fleet.duckdb")
    with run_sandbox() as sandbox:
        settings = Settings(api_key="status_key", base_url=sandbox.url, retry=RetryPolicy(max_retry_after=0, initial_backoff=0))
        result = asyncio.run(fetch_chunk(
            "specs",
            [{"vin": v} for v in (found, gone, broken)],
            calls=Calls(settings=settings),
        ))
        served = {(r["status"]): r["count"] for r in sandbox.stats()["requests"]}
    with open_database(path) as db:
        db.start_run("refresh", [], run_id="r1")
        db.land("vehicles", pl.DataFrame({"vin": [found, gone, broken]}), "r1")
        land_enrichment(db, "r1", result)
    publish(path)  # status reads what is published
    specs = fleet_status(path)["units_this_month"]
    assert [(r["endpoint"], r["calls"], r["failed_calls"], r["no_data_calls"]) for r in specs] == [
        ("/specs", sum(served.values()), served[502], served[404])]
    assert served[404] == 1 and served[502] == 1 + RetryPolicy().max_retries


def test_status_tells_not_applicable_vins_from_pending_ones(tmp_path, capsys):
    """A vehicle registered outside a dataset's markets is never called for it: not pending (issue 21: the
    sample's six non-US vehicles showed as pending history while run_datasets said 6 not applicable)."""
    csv = tmp_path / "fleet.csv"
    csv.write_text("unit_number,vin,state,country\n"
                   "U1,1HGCM82633A004352,TX,\nU2,1FTFW1E50KFA12345,CA,\n"
                   "U3,WBA3A5C51CF256651,,DE\nU4,WBA3A5C56G0915102,ON,\n")  # Germany; Ontario, Canada
    roster = read_fleet([str(csv)])
    path = str(tmp_path / "fleet.duckdb")
    now = datetime.now(timezone.utc)
    with open_database(path) as db:
        db.start_run("refresh", [str(csv)], run_id="r1", started_at=now)
        db.land_chunk({"vehicles": roster.roster}, "r1")
        vins = ["1HGCM82633A004352", "1FTFW1E50KFA12345", "WBA3A5C51CF256651", "WBA3A5C56G0915102"]
        db.land("fetch_status", _answered([(v, "specs", "found") for v in vins]
                                          + [("1HGCM82633A004352", "history", "found")], now), "r1")
        db.finish_run("r1", "completed", counts=roster.summary(), finished_at=now)
    publish(path)
    assert main(["status", "--db", path, "--json"]) == 0
    by_dataset = {r["dataset"]: (r["vins"], r["answered"], r["not_applicable"], r["never_asked"])
                  for r in json.loads(capsys.readouterr().out)["datasets"]}
    assert by_dataset == {
        "specs": (4, 4, 0, 0),  # every vehicle
        "history": (4, 1, 2, 1),  # US only: the German and the Canadian vehicle are not applicable
        "lien_theft": (4, 0, 2, 2),
        "market_value": (4, 0, 1, 3),  # US and Canada
        "recalls": (4, 0, 1, 3),  # North America
    }
    assert main(["status", "--db", path]) == 0
    assert "not applicable" in capsys.readouterr().out


def test_status_shows_spend_as_known_plus_possible_and_the_journals_in_quarantine(tmp_path, capsys):
    """A killed run's calls in flight are in the ledger as `unknown` (docs/ledger.md): status counts them apart,
    and lists the damaged journals a run kept in the staging area's quarantine folder."""
    path = str(tmp_path / "fleet.duckdb")
    at = max(datetime.now(timezone.utc), month_start() + timedelta(minutes=10)) - timedelta(minutes=5)
    with open_database(path) as db:
        db.start_run("refresh", [], run_id="killed", started_at=at)
        calls = _calls([("/specs", 200, 1)] * 3 + [("/specs", None, 1)] * 2, at)
        db.land("api_calls", calls.with_columns(billing=pl.Series(["known"] * 3 + ["unknown"] * 2)), "killed")
    publish(path)
    kept = tmp_path / "staging" / "quarantine" / "killed" / "specs-0123456789ab.arrows"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(bytes(64))

    assert main(["status", "--db", path, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert (status["units_this_month_total"], status["possible_units_this_month_total"]) == (5, 2)
    assert [(r["run_id"], r["units"], r["possible_units"]) for r in status["runs"]] == [("killed", 5, 2)]
    assert status["quarantined_journals"] == [str(kept)]
    assert main(["status", "--db", path]) == 0
    out = capsys.readouterr().out
    assert "3 known + 2 possible = 5 units" in out and "in quarantine" in out and kept.name in out


def test_a_database_published_before_vin_status_is_one_clear_line(tmp_path, capsys):
    """A file an earlier version published has no view vin_status: status says what to do, it does not crash."""
    import shutil

    from fleet_data.tasks.store.database import SQL_DIR, Database

    older = tmp_path / "migrations"
    older.mkdir()
    for migration in sorted((SQL_DIR / "migrations").glob("*.sql")):
        if int(migration.name[:4]) < 16:
            shutil.copy(migration, older)
    path = tmp_path / "old.duckdb"
    Database(path, migrations_dir=older, views_dir=tmp_path / "no_views").close()
    assert main(["status", "--db", str(path)]) == 2
    err = capsys.readouterr().err
    assert "earlier version" in err and "fleet refresh" in err and len(err.strip().splitlines()) == 1


def test_status_counts_the_units_of_a_run_whose_clock_was_behind_and_says_where_the_data_came_from(tmp_path, capsys):
    """A forced refresh on a machine whose clock said 2020, after this month's run: its calls are dated 2020, yet it
    came after this month's run, so its units are this month's (issue 26: they were missed)."""
    path = str(tmp_path / "fleet.duckdb")
    now = max(datetime.now(timezone.utc), month_start() + timedelta(minutes=10))
    behind = datetime(2020, 6, 1, 12, tzinfo=timezone.utc)
    roster = read_fleet([str(ROOT / "data" / "sample_fleet.csv")]).roster.head(3)
    with open_database(path) as db:
        db.start_run("refresh", [], run_id="real", started_at=now - timedelta(minutes=5), service="https://api.carsxe.com")
        db.land_chunk({"vehicles": roster}, "real")
        db.land("api_calls", _calls([("/specs", 200, 1)] * 3, now - timedelta(minutes=4)), "real")
        db.start_run("refresh", [], run_id="behind", started_at=behind, service="embedded sandbox")
        db.land("api_calls", _calls([("/specs", 200, 1)] * 2, behind), "behind")
        vins = roster["vin"].to_list()
        db.land("fetch_status", _answered([(v, "specs", "found") for v in vins[:2]], behind), "behind")
        db.land("fetch_status", _answered([(vins[2], "specs", "found")], now + timedelta(days=400)), "real")
    publish(path)

    assert main(["status", "--db", path, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["units_this_month_total"] == 5  # before: 3, the 2020 run's 2 missed
    assert [(r["run_id"], r["service"]) for r in status["runs"]] == [("behind", "embedded sandbox"),
                                                                      ("real", "https://api.carsxe.com")]
    assert [r["run_id"] for r in status["runs_with_clock_behind"]] == ["behind"]
    assert [(r["service"], r["answers"], r["dated_in_the_future"]) for r in status["services"]] == [
        ("embedded sandbox", 2, 0), ("https://api.carsxe.com", 1, 1)]
    assert main(["status", "--db", path]) == 0
    out = capsys.readouterr().out
    assert "Data from: the embedded sandbox (made-up answers): 2 answers on 2 vehicles (specs); " in out
    assert "Dated in the future: 1 answers" in out and "Clock behind: run behind started 2020-06-01 12:00Z" in out
