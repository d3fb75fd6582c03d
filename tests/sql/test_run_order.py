""""Latest" is the order answers arrived (runs' `run_seq`), not the clock: a run whose clock was behind still
replaces what earlier runs left, in every table and view, and its changes are recorded. Every row carries its
run's place in that order and the service it came from.

Answers are the sandbox's, landed through `land_enrichment` (the path of every refresh, backfill and replay).
"""

from __future__ import annotations

import copy
import shutil
from datetime import UTC, datetime, timedelta

import duckdb
import polars as pl

from fleet_data.tasks.store.database import SQL_DIR, Database
from tests.sql.test_changes import _campaign, _report, batch_check, changes, land, payload

VIN = "1HGCM82633A004352"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
BEHIND = datetime(2020, 6, 1, 12, 0, tzinfo=UTC)  # a later run's clock, six years behind
SERVICE = "https://api.carsxe.com"


def test_a_run_whose_clock_was_behind_still_shows_its_new_answers(db):
    db.land("vehicles", pl.DataFrame({"vin": [VIN], "unit_number": ["U-1"]}), "r1")
    db.start_run("refresh", [], {}, run_id="r1", started_at=NOW, service=SERVICE)
    firsts = {d: payload(d) for d in ("specs", "market_value", "history", "lien_theft")}
    firsts["lien_theft"]["events"] = [{"event": "Lien", "location": "TX", "details_list": ["Date: 2024-01-02"]}]
    for dataset, body in firsts.items():
        land(db, "r1", dataset, {VIN: body}, NOW)
    batch_check(db, "r1", {VIN: 1}, NOW)
    land(db, "r1", "recall_details", {VIN: _report(_campaign("24V001000"))}, NOW + timedelta(minutes=1))
    db.finish_run("r1", "completed", finished_at=NOW + timedelta(minutes=2))

    # The next run, on a machine whose clock says 2020: everything it fetched is dated six years earlier.
    db.start_run("refresh", [], {}, run_id="r2", started_at=BEHIND, service=SERVICE)
    later = copy.deepcopy(firsts)
    later["specs"]["attributes"]["model"] = "Model Renamed"
    later["market_value"]["retail"] = firsts["market_value"]["retail"] * 2
    later["history"]["brandsInformation"] = [{"brand_name": "Salvage"}]
    later["lien_theft"]["events"] = []
    for dataset, body in later.items():
        land(db, "r2", dataset, {VIN: body}, BEHIND)
    batch_check(db, "r2", {VIN: 1}, BEHIND)
    land(db, "r2", "recall_details", {VIN: _report(_campaign("26V009000", park_it=True))}, BEHIND + timedelta(minutes=1))
    db.finish_run("r2", "completed", finished_at=BEHIND + timedelta(minutes=2))

    overview = db.sql("SELECT model, retail, title_brands, lien_theft_events, open_recall_count, park_now, "
                      "park_now_campaigns FROM vehicle_overview").row(0, named=True)
    assert overview == {"model": "Model Renamed", "retail": firsts["market_value"]["retail"] * 2,
                        "title_brands": ["Salvage"], "lien_theft_events": 0, "open_recall_count": 1, "park_now": True,
                        "park_now_campaigns": ["26V009000"]}
    assert db.sql("SELECT DISTINCT run_id FROM fetch_status").rows() == [("r2",)]
    assert db.sql("SELECT run_id, retail FROM latest_market_values").row(0) == ("r2", firsts["market_value"]["retail"] * 2)
    assert db.sql("SELECT nhtsa_campaign_number, closed_at IS NOT NULL FROM recalls ORDER BY 1").rows() == [
        ("24V001000", True), ("26V009000", False)]
    assert changes(db, "r2") == [  # what r2 showed, against what r1 left: not "no changes"
        (VIN, "history", "new_title_brand", "Salvage", "high"),
        (VIN, "lien_theft", "released_lien", "Lien TX: Date: 2024-01-02", "info"),
        (VIN, "market_value", "value_move", "", "info"),
        (VIN, "recalls", "closed_recall", "24V001000", "info"),
        (VIN, "recalls", "new_recall", "26V009000", "park_now"),
        (VIN, "specs", "decode_changed", "", "info"),
    ]
    assert db.sql("SELECT DISTINCT run_id FROM changes_latest_run").rows() == [("r2",)]
    # The report's "What changed" over any period holding r2 shows r2's changes (detected_at is when they were
    # recorded: this clock, not r2's).
    assert db.query("report_changes", since=BEHIND - timedelta(days=1), limit=50)["run_id"].unique().to_list() == ["r2"]
    assert db.query("report_last_run")["run_id"].to_list() == ["r2"]
    assert db.query("status_recent_runs", limit=1)["run_id"].to_list() == ["r2"]


def test_every_answer_row_carries_its_runs_place_and_service(db):
    db.start_run("refresh", [], {}, run_id="r1", started_at=NOW, service=SERVICE)
    db.start_run("refresh", [], {}, run_id="r2", started_at=BEHIND, service="embedded sandbox")
    land(db, "r1", "specs", {VIN: payload("specs")}, NOW)
    land(db, "r2", "market_value", {VIN: payload("market_value")}, BEHIND)
    land(db, "ghost", "history", {VIN: payload("history")}, NOW)  # a run this database does not hold
    assert db.sql("SELECT run_id, run_seq, service FROM runs ORDER BY run_seq").rows() == [
        ("r1", 1, SERVICE), ("r2", 2, "embedded sandbox")]
    for table, expected in (("specs", ("r1", 1, SERVICE)), ("market_values", ("r2", 2, "embedded sandbox")),
                            ("trade_in_history", ("r2", 2, "embedded sandbox")), ("history_reports", ("ghost", 0, None))):
        assert set(db.sql(f"SELECT run_id, run_seq, service FROM {table}").rows()) == {expected}, table  # noqa: S608
    assert set(db.sql("SELECT dataset, run_seq, service FROM fetch_status").rows()) == {
        ("specs", 1, SERVICE), ("market_value", 2, "embedded sandbox"), ("history", 0, None)}
    assert set(db.sql("SELECT dataset, run_seq, service FROM raw_responses").rows()) == {
        ("specs", 1, SERVICE), ("market_value", 2, "embedded sandbox"), ("history", 0, None)}
    summary = db.sql("SELECT service, dataset, answers FROM answer_services ORDER BY ALL").rows()
    assert summary == []  # no roster yet: the view speaks of the roster's vehicles
    db.land("vehicles", pl.DataFrame({"vin": [VIN]}), "r2")
    assert db.sql("SELECT service, made_up, dataset, answers FROM answer_services ORDER BY ALL").rows() == [
        ("embedded sandbox", True, "market_value", 1), (SERVICE, False, "specs", 1), (None, None, "history", 1)]


def test_an_older_database_is_numbered_by_start_time_and_its_answers_are_of_an_unknown_service(tmp_path):
    before = tmp_path / "migrations_0011"
    before.mkdir()
    for path in sorted((SQL_DIR / "migrations").glob("*.sql")):
        if int(path.name[:4]) <= 11:
            shutil.copy(path, before)
    path = tmp_path / "old.duckdb"
    old = Database(path, migrations_dir=before, views_dir=tmp_path / "no_views")
    for run, at in (("late", NOW), ("early", NOW - timedelta(days=3))):
        old.connection.execute("INSERT INTO runs (run_id, kind, status, started_at) VALUES ($run, 'refresh', 'completed', "
                               "$at)", {"run": run, "at": at})
    for vin, run in ((VIN, "late"), ("1HGCM82633A004353", "early"), ("1HGCM82633A004354", "gone")):
        old.connection.execute("INSERT INTO fetch_status VALUES ($vin, 'specs', 'found', $run, $at)",
                               {"vin": vin, "run": run, "at": NOW})
    old.close()

    upgraded = Database(path)
    assert upgraded.applied[:2] == [12, 13]
    assert upgraded.sql("SELECT run_id, run_seq, service FROM runs ORDER BY run_seq").rows() == [
        ("early", 1, None), ("late", 2, None)]
    assert upgraded.sql("SELECT run_id, run_seq, service FROM fetch_status ORDER BY run_seq").rows() == [
        ("gone", 0, None), ("early", 1, None), ("late", 2, None)]
    upgraded.start_run("refresh", [], {}, run_id="next", started_at=NOW - timedelta(days=400))  # a clock behind
    assert upgraded.sql("SELECT run_seq FROM runs WHERE run_id = 'next'").item() == 3  # still the next in order
    upgraded.close()
    with duckdb.connect(str(path), read_only=True) as raw:
        assert raw.execute("SELECT count(*) FROM schema_migrations WHERE version IN (12, 13)").fetchall() == [(2,)]
