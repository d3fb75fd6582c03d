"""`fleet backfill`: re-fetch a run's failures or chosen VINs through the refresh's chunk task, and
re-parse stored raw answers without calling the service. Flows run under one Prefect test harness
against the sandbox on a real socket; calls are counted by the sandbox itself."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pytest
from prefect.testing.utilities import prefect_test_harness

from fleet_data.connectors.sandbox import run_sandbox
from fleet_data.flows import backfill
from fleet_data.flows.cli import main
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.steps.backfill_tasks import MODELS, check_vins, parse_raw_rows, read_vins_file
from fleet_data.tasks.ingest.fleet_files import read_fleet
from fleet_data.tasks.settings import BackfillOptions
from fleet_data.tasks.store.database import open_database

ROOT = Path(__file__).resolve().parents[2]
KEY = "test_backfill_key_7f3a9c1e55"  # distinctive: scanned for in every output
NEW_VIN = "1HGCM82633A004352"  # valid, not on the sample roster


@pytest.fixture(scope="module")
def harness():
    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="module")
def sandbox():
    saved = {k: os.environ.get(k) for k in ("VDS_BASE_URL", "VDS_API_KEY")}
    with run_sandbox() as sb:
        os.environ.update(VDS_BASE_URL=sb.url, VDS_API_KEY=KEY)
        try:
            yield sb
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A roster of 30 sample VINs and two past runs' open failures (landed as the refresh lands them)."""
    folder = tmp_path_factory.mktemp("backfill")
    csv = folder / "fleet.csv"
    csv.write_text("".join((ROOT / "data" / "sample_fleet.csv").read_text().splitlines(keepends=True)[:31]))
    roster = read_fleet([str(csv)])
    db_path = str(folder / "fleet.duckdb")
    earlier = datetime.now(timezone.utc) - timedelta(days=1)
    with open_database(db_path) as db:
        first = db.start_run("refresh", [str(csv)], run_id="run-1", started_at=earlier)
        db.land_chunk({"vehicles": roster.roster}, first)
        db.finish_run(first, "partial", counts=roster.summary())
        vins = sorted(db.query("roster_vins")["vin"].to_list())
        fail = lambda vin, dataset: {"vin": vin, "dataset": dataset, "status": 502, "message": "Could not fetch data",  # noqa: E731
                                     "retryable": True, "attempts": 3, "fetched_at": earlier}
        db.land("failures", staging.failures_frame(
            [fail(v, "specs") for v in vins[:3]] + [fail(vins[3], "market_value"), fail(vins[4], "recalls")]), first)
        second = db.start_run("refresh", [str(csv)], run_id="run-2", started_at=earlier)
        db.land("failures", staging.failures_frame([fail(vins[5], "history")]), second)
        db.finish_run(second, "partial")
    return {"db": db_path, "lake": str(folder / "lake"), "vins": vins, "folder": folder}


def _calls(sb) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in sb.stats()["requests"]:
        counts[r["endpoint"]] = counts.get(r["endpoint"], 0) + r["count"]
    return counts


def _grown(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}


@pytest.fixture(scope="module")
def backfilled(harness, sandbox, fleet):
    """Backfill run-1's failures once; tests below read what it did."""
    before = _calls(sandbox)
    summary = backfill.backfill_fleet(BackfillOptions(db=fleet["db"], lake=fleet["lake"], failures_of="run-1",
                                                      chunk_size=2))
    return {"summary": summary, "calls": _grown(before, _calls(sandbox))}


def test_backfill_of_a_runs_failures_calls_only_for_them(backfilled, fleet):
    vins = fleet["vins"]
    assert backfilled["calls"] == {"/specs": 3, "/v2/marketvalue": 1, "/v1/recalls": 1}
    summary = backfilled["summary"]
    assert summary["status"] == "completed"
    assert {k: d["planned"] for k, d in summary["datasets"].items()} == {"specs": 3, "market_value": 1, "recalls": 1}
    with open_database(fleet["db"]) as db:
        called = db.sql("SELECT endpoint, vin FROM api_calls WHERE run_id = $r ORDER BY ALL", {"r": summary["run_id"]})
        run = db.sql("SELECT kind, status FROM runs WHERE run_id = $r", {"r": summary["run_id"]}).row(0)
        per_dataset = db.sql("SELECT dataset, planned, found + no_data AS answered FROM run_datasets WHERE run_id = $r "
                             "ORDER BY dataset", {"r": summary["run_id"]}).rows()
    assert sorted(called.rows()) == sorted([("/specs", v) for v in vins[:3]] + [("/v2/marketvalue", vins[3]),
                                                                                 ("/v1/recalls", vins[4])])
    assert run == ("backfill", "completed")
    assert per_dataset == [("market_value", 1, 1), ("recalls", 1, 1), ("specs", 3, 3)]
    assert (Path(fleet["lake"]) / "runs" / "part-0.parquet").is_file()


def test_backfill_resolves_those_failures_and_no_others(backfilled, fleet):
    run_id = backfilled["summary"]["run_id"]
    with open_database(fleet["db"]) as db:
        rows = db.sql("SELECT vin, dataset, resolved_run_id FROM failures ORDER BY dataset, vin").rows()
        recalls_fresh = db.sql("SELECT run_id FROM fetch_status WHERE vin = $v AND dataset = 'recalls'",
                               {"v": fleet["vins"][4]}).rows()
    resolved = {(vin, dataset) for vin, dataset, by in rows if by == run_id}
    vins = fleet["vins"]
    assert resolved == {(v, "specs") for v in vins[:3]} | {(vins[3], "market_value"), (vins[4], "recalls")}
    assert [r for r in rows if r[1] == "history"] == [(vins[5], "history", None)]  # run-2's failure stays open
    # A per-VIN recall lookup counts as a fresh recall check: the next refresh will not pay for it again.
    assert recalls_fresh == [(run_id,)]


def test_cli_refuses_invalid_vins_without_calling(backfilled, fleet, sandbox, capsys):
    before = _calls(sandbox)
    code = main(["backfill", "--db", fleet["db"], "--lake", "", "--vins", f"{fleet['vins'][0]},1HGCM82633A004351,ABC"])
    err = capsys.readouterr().err
    assert code == 2
    assert "1HGCM82633A004351 (check_digit)" in err and "ABC (wrong_length)" in err
    assert fleet["vins"][0] not in err  # on the roster: accepted
    assert _calls(sandbox) == before


def test_cli_backfills_given_vins_and_never_prints_the_key(backfilled, fleet, sandbox, capsys):
    vins_file = fleet["folder"] / "vins.txt"
    # vins[0] had its specs fetched by the backfill above: the same answer again is stored once.
    vins_file.write_text(f"vin\n{fleet['vins'][0].lower()}\n{NEW_VIN}\n{fleet['vins'][0]}\n")
    before = _calls(sandbox)
    code = main(["backfill", "--db", fleet["db"], "--lake", fleet["lake"], "--vins-file", str(vins_file),
                 "--datasets", "specs,history", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)
    assert {k: d["planned"] for k, d in summary["datasets"].items()} == {"specs": 2, "history": 2}
    assert _grown(before, _calls(sandbox)) == {"/specs": 2, "/history": 2}
    assert KEY not in out + err
    with open_database(fleet["db"]) as db:
        assert db.sql("SELECT count(*) FROM specs WHERE vin = $v", {"v": NEW_VIN}).item() == 1


def test_backfill_first_lands_what_a_killed_run_paid_for(backfilled, fleet, sandbox):
    """A run killed before its landing left its answers journalled: the backfill lands them under that
    run, before anything else, and does not ask for them again."""
    import asyncio

    from fleet_data.connectors import Settings
    from fleet_data.tasks.fetch.enrich import fetch_chunk
    from fleet_data.tasks.staging.journal import AnswerJournal

    paid, asked = fleet["vins"][6], fleet["vins"][7]
    answers = Path(fleet["db"]).resolve().parent / "staging" / "run-2" / "answers"
    with AnswerJournal.create(answers, "run-2", "history", secrets=(KEY,)) as journal:
        asyncio.run(fetch_chunk(
            "history",
            [{"vin": paid}],
            calls=Calls(settings=Settings(api_key=KEY, base_url=sandbox.url)),
            journal=journal,
        ))
    before = _calls(sandbox)
    assert main(["backfill", "--db", fleet["db"], "--lake", "", "--vins", asked, "--datasets", "history"]) == 0
    assert _grown(before, _calls(sandbox)) == {"/history": 1}  # the VIN asked for, not the one journalled
    with open_database(fleet["db"]) as db:
        landed = db.sql("SELECT run_id FROM fetch_status WHERE vin = $v AND dataset = 'history'", {"v": paid}).rows()
        paid_for = db.sql("SELECT run_id FROM api_calls WHERE vin = $v AND endpoint = '/history'", {"v": paid}).rows()
    assert landed == paid_for == [("run-2",)]
    assert not journal.path.exists()


def test_reparse_rebuilds_tables_from_raw_answers_without_any_call(backfilled, fleet, sandbox, monkeypatch):
    with open_database(fleet["db"]) as db:
        vin = fleet["vins"][0]  # fetched twice: re-parsing lands the older answer, then the newer one
        before = {t: db.sql(f"SELECT count(*) FROM {t}").item()
                  for t in ("specs", "market_values", "trade_in_history", "recall_checks")}
        valued = db.sql("SELECT count(DISTINCT vin) FROM market_values").item()
        assert before["trade_in_history"] == 6 * valued > 0  # the six months every valuation carries
        origin = db.sql("SELECT run_id, fetched_at FROM specs WHERE vin = $v", {"v": vin}).row(0)
        # A "model change": the stored answer reads differently now, and the valuations table was lost.
        db.sql("UPDATE raw_responses SET body = json_merge_patch(body, '{\"attributes\": {\"make\": \"Reparsed\"}}') "
               "WHERE dataset = 'specs' AND vin = $v", {"v": vin})
        db.sql("DELETE FROM market_values")
        db.sql("DELETE FROM trade_in_history")  # as in a database from before it existed: filled from raw answers
    monkeypatch.setenv("VDS_BASE_URL", "http://127.0.0.1:9")  # nothing listens there: any call would fail
    calls = sandbox.stats()["total"]
    summary = backfill.reparse_raw_responses(fleet["db"], ["specs", "market_value", "recalls"], chunk_size=2)
    assert sandbox.stats()["total"] == calls
    assert summary["status"] == "completed" and summary["calls"] == 0
    with open_database(fleet["db"]) as db:
        after = {t: db.sql(f"SELECT count(*) FROM {t}").item() for t in before}
        make, run_id, fetched_at = db.sql("SELECT make, run_id, fetched_at FROM specs WHERE vin = $v", {"v": vin}).row(0)
        run = db.sql("SELECT kind, status, units_used FROM runs WHERE run_id = $r", {"r": summary["run_id"]}).row(0)
        raw = dict(db.sql("SELECT dataset, count(*) FROM raw_responses GROUP BY dataset").rows())
    assert make == "Reparsed"
    assert (run_id, fetched_at) == origin  # rows keep the run and time of the fetch they came from
    assert after == before  # every valuation rebuilt, recall checks replaced rather than copied
    assert run[:2] == ("reparse", "completed")
    assert summary["datasets"]["specs"]["found"] == raw["specs"]


def test_reparse_dates_an_answer_received_again_at_its_latest_fetch(backfilled, fleet):
    """The same answer is stored once (at its first fetch); the table's row came from it at a later fetch."""
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with open_database(fleet["db"]) as db:
        vin = db.sql("SELECT vin FROM raw_responses WHERE dataset = 'history' ORDER BY vin LIMIT 1").item()
        db.start_run("refresh", [], {}, run_id="run-later", started_at=later)  # the later run that received it again
        seq = db.sql("SELECT run_seq FROM runs WHERE run_id = 'run-later'").item()
        db.sql("UPDATE fetch_status SET fetched_at = $t, run_id = 'run-later', run_seq = $s "
               "WHERE vin = $v AND dataset = 'history'", {"t": later, "v": vin, "s": seq})
        db.sql("UPDATE history_reports SET fetched_at = $t, run_id = 'run-later', run_seq = $s, vin_changed = NULL "
               "WHERE vin = $v", {"t": later, "v": vin, "s": seq})
    backfill.reparse_raw_responses(fleet["db"], ["history"])
    with open_database(fleet["db"]) as db:
        row = db.sql("SELECT vin_changed, run_id, fetched_at FROM history_reports WHERE vin = $v", {"v": vin}).row(0)
    assert row[0] is not None and row[1:] == ("run-later", later)


def test_nothing_stored_holds_the_key(backfilled, fleet):
    with open_database(fleet["db"]) as db:
        tables = db.sql("SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'")["table_name"]
        for table in tables:
            text = str(db.sql(f"SELECT * FROM {table}").to_dicts())
            assert KEY not in text, table
    for path in Path(fleet["lake"]).rglob("*.parquet"):
        assert KEY.encode() not in path.read_bytes(), path


def test_vins_checked_and_read_without_prefect(fleet, tmp_path):
    with open_database(fleet["db"]) as db:
        accepted, refused = check_vins(db, [fleet["vins"][0].lower(), NEW_VIN, "1HGCM82633A004351", " "])
    assert accepted == [fleet["vins"][0], NEW_VIN]
    assert refused == [("1HGCM82633A004351", "check_digit"), (" ", "missing")]
    parquet = tmp_path / "vins.parquet"
    pl.DataFrame({"VIN": [NEW_VIN]}).write_parquet(parquet)
    assert read_vins_file(parquet) == [NEW_VIN]
    plain = tmp_path / "vins.txt"
    plain.write_text(f"# to fetch again\n{NEW_VIN}\n\n")
    assert read_vins_file(plain) == [NEW_VIN]


def test_unparseable_answers_are_counted_not_landed():
    at = datetime.now(timezone.utc)
    rows = [{"run_id": "r", "fetched_at": at, "vin": NEW_VIN, "endpoint": "specs", "batch_id": None,
             "request_params": "{}", "body": '{"attributes": "not an object"}'}]
    frames, counts = parse_raw_rows("specs", rows)
    assert counts == {"found": 0, "failed": 1, "skipped": 0} and frames == {}
    assert set(MODELS) == set(backfill.REPARSE_DATASETS)


REFUSAL = r"the plan costs (\d+) units, more than --max-units (\d+): nothing was called"


def test_max_units_refuses_a_backfill_before_any_call_as_a_refresh_does(backfilled, fleet, sandbox, capsys):
    """issue 30: `fleet backfill --max-units 1` spent a unit and ended partial, where a refresh refuses (exit 4)."""
    import re

    before = _calls(sandbox)
    vins = fleet["vins"][:3]
    code = main(["backfill", "--db", fleet["db"], "--lake", "", "--vins", ",".join(vins), "--max-units", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 4 and out["status"] == "refused"
    assert re.fullmatch(REFUSAL, out["message"]).groups() == (str(3 * 5), "2")  # five datasets, a unit each
    assert _calls(sandbox) == before  # nothing called
    with open_database(fleet["db"]) as db:
        run = db.sql("SELECT kind, status, message FROM runs WHERE run_id = $r", {"r": out["run_id"]}).row(0)
        calls = db.sql("SELECT count(*) FROM api_calls WHERE run_id = $r", {"r": out["run_id"]}).item()
    assert run == ("backfill", "refused", out["message"]) and calls == 0
    # The refresh's refusal is the same sentence, from the same place.
    csv = fleet["folder"] / "fleet.csv"
    assert main(["refresh", str(csv), "--db", fleet["db"], "--dry-run", "--force", "--max-units", "2", "--json"]) == 4
    assert re.fullmatch(REFUSAL, json.loads(capsys.readouterr().out)["message"])


def test_backfill_dry_run_prints_the_plan_and_its_cost_and_calls_or_writes_nothing(backfilled, fleet, sandbox, capsys):
    lock = Path(fleet["db"] + ".lock")
    before, published = _calls(sandbox), Path(fleet["db"]).stat().st_mtime_ns
    locked = lock.stat().st_mtime_ns if lock.exists() else None
    vins = fleet["vins"][:2]
    code = main(["backfill", "--db", fleet["db"], "--vins", ",".join(vins), "--datasets", "specs,market_value",
                 "--dry-run"])
    printed = capsys.readouterr()
    assert code == 0
    assert "Plan: 4 units" in printed.err and "/specs" in printed.err and "/v2/marketvalue" in printed.err
    assert main(["backfill", "--db", fleet["db"], "--failures", "--dry-run", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["status"] == "planned" and planned["kind"] == "backfill"
    import duckdb

    with duckdb.connect(fleet["db"], read_only=True) as con:  # what is published: what the dry run reads
        open_failures = dict(con.execute("SELECT dataset, count(DISTINCT vin) FROM failures WHERE resolved_at IS NULL "
                                         "GROUP BY dataset").fetchall())
    assert open_failures and {k: (d["planned"], d["estimated_units"]) for k, d in planned["datasets"].items()} == {
        k: (n, n) for k, n in open_failures.items()}
    assert _calls(sandbox) == before and Path(fleet["db"]).stat().st_mtime_ns == published
    assert (lock.stat().st_mtime_ns if lock.exists() else None) == locked  # no lock taken


def test_the_help_of_backfill_says_what_it_does(capsys):
    for command in ("refresh", "backfill"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "--dry-run print the plan and its cost; make no call" in text, command
        assert "refuse a plan that costs more" in text, command
