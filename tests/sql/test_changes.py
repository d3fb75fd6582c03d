"""What changed since a vehicle's previous answer, recorded as answers land: exact `changes` rows.

Answers are built like the service's (the sandbox's generators), parsed by the client's models and
landed through `land_enrichment`, the path every refresh, backfill and journal replay takes.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from fleet_data.connectors import models as m
from fleet_data.connectors.sandbox import recalls as sandbox_recalls
from fleet_data.connectors.sandbox import valuation as sandbox_values
from fleet_data.connectors.sandbox import vehicles as sandbox_vehicles
from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.land.landing import fetch_status_frame, land_enrichment

VIN = "1HGCM82633A004352"  # the spec's example VIN: data everywhere, open recalls, lien/theft events
OTHER = "1HGCM82633A004353"
T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
T1 = datetime(2026, 2, 5, 12, 0, tzinfo=UTC)
T2 = datetime(2026, 3, 5, 12, 0, tzinfo=UTC)
MODELS = {"specs": m.SpecsResult, "market_value": m.MarketValue, "history": m.HistoryReport,
          "lien_theft": m.LienTheftResult, "recall_details": m.RecallReport}


def payload(dataset: str, vin: str = VIN) -> dict:
    """A fresh copy of what the sandbox answers for `vin`."""
    made = {
        "specs": lambda: {"input": {"vin": vin}, **sandbox_vehicles.specs(vin)},
        "market_value": lambda: sandbox_values.market_value_v2(vin, None, None, None),
        "history": lambda: sandbox_vehicles.history(vin),
        "lien_theft": lambda: sandbox_vehicles.lien_theft(vin),
        "recall_details": lambda: {"data": sandbox_recalls.recall_report(vin)},
    }[dataset]()
    return copy.deepcopy(made)


def land(db, run: str, dataset: str, answers: dict[str, dict | None], at: datetime) -> None:
    """One chunk of answers (None = a 404 "no data"), as a refresh lands it."""
    found = [(vin, MODELS[dataset].from_payload(body), at) for vin, body in answers.items() if body is not None]
    no_data = [(vin, at) for vin, body in answers.items() if body is None]
    land_enrichment(db, run, ChunkResult(dataset, found=found, no_data=no_data))


def batch_check(db, run: str, counts: dict[str, int], at: datetime) -> None:
    items = [m.BatchResultItem(vin=v, hasRecalls=n > 0, recallCount=n) for v, n in counts.items()]
    db.land_chunk({"recall_checks": staging.recall_checks_from_batch(items, "rb_1", at),
                   "fetch_status": fetch_status_frame("recalls", [(v, at) for v in counts], [])}, run)


def start(db, run: str, at: datetime, **parameters) -> str:
    return db.start_run("refresh", ["fleet.csv"], parameters, run_id=run, started_at=at)


def changes(db, run: str | None = None) -> list[tuple]:
    where = "WHERE run_id = $run" if run else ""
    return db.sql(f"SELECT vin, dataset, kind, subject, severity FROM changes {where} ORDER BY ALL",
                  {"run": run} if run else None).rows()


def detail(db, run: str, kind: str) -> tuple[dict | None, dict | None]:
    before, after = db.sql("SELECT before, after FROM changes WHERE run_id = $run AND kind = $kind",
                           {"run": run, "kind": kind}).row(0)
    return (json.loads(before) if before else None), (json.loads(after) if after else None)


def test_a_vehicles_first_answers_are_not_changes(db):
    start(db, "r1", T0)
    for dataset in ("specs", "market_value", "history", "lien_theft"):
        land(db, "r1", dataset, {VIN: payload(dataset), OTHER: payload(dataset, OTHER)}, T0)
    batch_check(db, "r1", {VIN: 2, OTHER: 0}, T0)
    land(db, "r1", "recall_details", {VIN: payload("recall_details")}, T0 + timedelta(minutes=1))
    assert changes(db) == []


def test_a_vin_that_decodes_differently(db):
    start(db, "r1", T0)
    start(db, "r2", T1)
    land(db, "r1", "specs", {VIN: payload("specs")}, T0)
    same, changed = payload("specs"), payload("specs")
    changed["attributes"]["trim"] = "Touring"
    land(db, "r2", "specs", {VIN: changed, OTHER: payload("specs", OTHER)}, T1)
    assert changes(db, "r2") == [(VIN, "specs", "decode_changed", "", "info")]
    before, after = detail(db, "r2", "decode_changed")
    assert before["trim"] == same["attributes"]["trim"] and after["trim"] == "Touring"
    assert after["year"] == int(same["attributes"]["year"]) and after["make"] == "Honda"


def test_a_value_move_beyond_the_runs_threshold(db):
    start(db, "r1", T0)
    start(db, "r2", T1)
    start(db, "r3", T2, value_move=3)
    first = payload("market_value")
    retail = first["retail"]
    land(db, "r1", "market_value", {VIN: first}, T0)
    small = payload("market_value")
    small["retail"] = round(retail * 1.05)
    land(db, "r2", "market_value", {VIN: small}, T1)
    assert changes(db, "r2") == []  # 5% is within the default 10%

    land(db, "r3", "market_value", {VIN: small}, T2)  # the same value: no move at any threshold
    moved = payload("market_value")
    moved["retail"] = round(retail * 1.05 * 0.96)
    land(db, "r3", "market_value", {VIN: moved}, T2 + timedelta(hours=1))  # replaces T2's row (same day)
    assert changes(db, "r3") == [(VIN, "market_value", "value_move", "", "info")]  # -4%, beyond this run's 3%
    before, after = detail(db, "r3", "value_move")
    assert before["retail"] == small["retail"] and after["retail"] == moved["retail"]
    assert after["change_pct"] == pytest.approx(100 * (moved["retail"] - small["retail"]) / small["retail"], abs=0.01)


def test_a_revaluation_at_another_mileage_is_no_value_move(db):
    """Issue 26: the first valuation asked with the fleet file's mileage, the next with the history odometer."""
    for run, at in (("r1", T0), ("r2", T1), ("r3", T2)):
        start(db, run, at)
    asked = {"state": "TX", "mileage_unit": "mi", "condition": "clean", "country": "US"}
    file_mileage = {**asked, "mileage": 30000, "mileage_source": "fleet_file"}
    odometer = {**asked, "mileage": 90000, "mileage_source": "history"}

    def value(run: str, retail: float, request: dict, at: datetime) -> None:
        body = payload("market_value")
        body["retail"] = retail
        result = ChunkResult("market_value", found=[(VIN, m.MarketValue.from_payload(body), at)], requests={VIN: request})
        land_enrichment(db, run, result)

    value("r1", 20000, file_mileage, T0)
    value("r2", 16000, odometer, T1)  # -20%, only because 60,000 more miles were asked
    assert changes(db, "r2") == [(VIN, "market_value", "revaluation", "", "info")]
    before, after = detail(db, "r2", "revaluation")
    assert (before["mileage"], before["mileage_source"], after["mileage"], after["mileage_source"]) == (
        30000, "fleet_file", 90000, "history")
    assert (before["retail"], after["retail"], after["change_pct"]) == (20000, 16000, -20)
    value("r3", 13600, odometer, T2)  # the same request: the world moved -15%
    assert changes(db, "r3") == [(VIN, "market_value", "value_move", "", "info")]
    rows = db.sql("SELECT mileage, mileage_source, country FROM market_values ORDER BY valued_on").rows()
    assert rows == [(30000, "fleet_file", "US"), (90000, "history", "US"), (90000, "history", "US")]


def test_title_brands_and_an_odometer_rollback(db):
    start(db, "r1", T0)
    start(db, "r2", T1)
    first = payload("history")
    first["brandsInformation"] = [{"brand_name": "Flood Damage", "date": "2024-01-02"}]
    first["historyInformation"] = [{"date": "2023-01-02", "odometer": 10000}, {"date": "2024-01-02", "odometer": 20000}]
    first["currentTitleInformation"] = first["historyInformation"][-1:]
    land(db, "r1", "history", {VIN: first}, T0)
    later = payload("history")
    later["brandsInformation"] = [{"brand_name": "Salvage", "date": "2026-01-02"}]
    later["historyInformation"] = [*first["historyInformation"], {"date": "2025-06-01", "odometer": 12000}]
    later["currentTitleInformation"] = later["historyInformation"][-1:]
    land(db, "r2", "history", {VIN: later}, T1)
    assert changes(db, "r2") == [
        (VIN, "history", "cleared_title_brand", "Flood Damage", "info"),
        (VIN, "history", "new_title_brand", "Salvage", "high"),
        (VIN, "history", "odometer_rollback", "2025-06-01", "high"),
    ]
    before, after = detail(db, "r2", "odometer_rollback")
    assert before == {"date": "2024-01-02", "odometer": 20000} and after == {"date": "2025-06-01", "odometer": 12000}


def test_theft_and_lien_events_and_a_released_lien(db):
    lien = {"event": "Lien", "location": "TX", "details_list": ["Date: 2024-01-02", "Lienholder: Test Bank N.A."]}
    theft = {"event": "Theft", "location": "CA", "details_list": ["Date: 2026-01-20", "Agency: CA State Police"]}
    second_lien = {"event": "Lien", "location": "TX", "details_list": ["Date: 2026-01-21", "Lienholder: Example Auto Finance"]}
    for run, at in (("r1", T0), ("r2", T1), ("r3", T2)):
        start(db, run, at)
    first, later = payload("lien_theft"), payload("lien_theft")
    first["events"] = [lien]
    later["events"] = [theft, second_lien]  # the first lien is gone: released
    land(db, "r1", "lien_theft", {VIN: first}, T0)
    land(db, "r2", "lien_theft", {VIN: later}, T1)
    assert changes(db, "r2") == [
        (VIN, "lien_theft", "new_lien", "Lien TX: Date: 2026-01-21; Lienholder: Example Auto Finance", "high"),
        (VIN, "lien_theft", "new_theft", "Theft CA: Date: 2026-01-20; Agency: CA State Police", "high"),
        (VIN, "lien_theft", "released_lien", "Lien TX: Date: 2024-01-02; Lienholder: Test Bank N.A.", "info"),
    ]
    assert detail(db, "r2", "new_theft") == (None, theft)
    # A newer "no lien or theft data" answer releases the liens still held.
    land(db, "r3", "lien_theft", {VIN: None}, T2)
    assert changes(db, "r3") == [
        (VIN, "lien_theft", "released_lien", "Lien TX: Date: 2026-01-21; Lienholder: Example Auto Finance", "info")]


def _campaign(number: str, **fields) -> dict:
    return {"nhtsa_campaign_number": number, "component": "STEERING", "summary": f"campaign {number}",
            "park_it": False, "park_outside": False, **fields}


def _report(*campaigns: dict) -> dict:
    body = payload("recall_details")
    body["data"].update(recalls=list(campaigns), recall_count=len(campaigns), has_recalls=bool(campaigns))
    return body


def test_new_and_closed_recall_campaigns_park_it_first(db):
    a, b = _campaign("24V001000"), _campaign("24V002000")
    park_it = _campaign("26V003000", component="AIR BAGS", park_it=True)
    park_outside = _campaign("26V004000", component="ENGINE AND ENGINE COOLING", park_outside=True)
    for run, at in (("r1", T0), ("r2", T1), ("r3", T2)):
        start(db, run, at)
    batch_check(db, "r1", {VIN: 2}, T0)
    land(db, "r1", "recall_details", {VIN: _report(a, b)}, T0 + timedelta(minutes=1))
    assert changes(db) == []

    batch_check(db, "r2", {VIN: 3}, T1)
    land(db, "r2", "recall_details", {VIN: _report(b, park_it, park_outside)}, T1 + timedelta(minutes=1))
    assert changes(db, "r2") == [
        (VIN, "recalls", "closed_recall", "24V001000", "info"),
        (VIN, "recalls", "new_recall", "26V003000", "park_now"),
        (VIN, "recalls", "new_recall", "26V004000", "park_outside"),
    ]
    rows = db.sql("SELECT after->>'component', (after->>'park_it')::BOOLEAN FROM changes "
                  "WHERE run_id = 'r2' AND subject = '26V003000'").rows()
    assert rows == [("AIR BAGS", True)]

    # A batch count of 0 is a complete answer: every open campaign closes.
    batch_check(db, "r3", {VIN: 0}, T2)
    assert changes(db, "r3") == [(VIN, "recalls", "closed_recall", n, "info") for n in ("24V002000", "26V003000", "26V004000")]


def test_landing_the_same_answers_again_records_nothing_twice(db):
    """A journal replayed after a crash lands a chunk again, under its run: no change is doubled."""
    lien = {"event": "Lien", "location": "TX", "details_list": ["Date: 2024-01-02"]}
    # r0 started first: its answers landing late (a journal of a killed run) are older than r1's and r2's.
    for run, at in (("r0", T0 - timedelta(days=30)), ("r1", T0), ("r2", T1)):
        start(db, run, at)
    firsts = {d: payload(d) for d in ("specs", "market_value", "history", "lien_theft")}
    firsts["lien_theft"]["events"] = [lien]
    for dataset, body in firsts.items():
        land(db, "r1", dataset, {VIN: body}, T0)
    batch_check(db, "r1", {VIN: 1}, T0)
    land(db, "r1", "recall_details", {VIN: _report(_campaign("24V001000"))}, T0 + timedelta(minutes=1))

    later = copy.deepcopy(firsts)
    later["specs"]["attributes"]["model"] = "Model Renamed"
    later["market_value"]["retail"] = firsts["market_value"]["retail"] * 2
    later["history"]["brandsInformation"] = [{"brand_name": "Salvage"}]
    later["lien_theft"]["events"] = []
    for _ in range(2):
        for dataset, body in later.items():
            land(db, "r2", dataset, {VIN: body}, T1)
        batch_check(db, "r2", {VIN: 1}, T1)
        land(db, "r2", "recall_details", {VIN: _report(_campaign("26V009000", park_it=True))}, T1 + timedelta(minutes=1))
    expected = [
        (VIN, "history", "new_title_brand", "Salvage", "high"),
        (VIN, "lien_theft", "released_lien", "Lien TX: Date: 2024-01-02", "info"),
        (VIN, "market_value", "value_move", "", "info"),
        (VIN, "recalls", "closed_recall", "24V001000", "info"),
        (VIN, "recalls", "new_recall", "26V009000", "park_now"),
        (VIN, "specs", "decode_changed", "", "info"),
    ]
    assert changes(db, "r2") == expected

    # An older answer landing late (a replay, a re-parse) is not the newest: it changes nothing.
    for dataset, body in firsts.items():
        land(db, "r0", dataset, {VIN: body}, T0 - timedelta(days=30))
    assert changes(db, "r0") == [] and changes(db, "r2") == expected


def test_views_show_the_latest_runs_changes_most_severe_first(db):
    for run, at in (("r1", T0), ("r2", T1)):
        start(db, run, at)
    batch_check(db, "r1", {VIN: 1, OTHER: 1}, T0)
    land(db, "r1", "recall_details", {VIN: _report(_campaign("24V001000")), OTHER: _report(_campaign("24V001000"))},
         T0 + timedelta(minutes=1))
    db.finish_run("r1", "completed")
    batch_check(db, "r2", {VIN: 2, OTHER: 2}, T1)
    land(db, "r2", "recall_details", {
        VIN: _report(_campaign("24V001000"), _campaign("26V003000", park_it=True)),
        OTHER: _report(_campaign("24V001000"), _campaign("26V005000")),
    }, T1 + timedelta(minutes=1))
    db.finish_run("r2", "completed")

    latest = db.sql("SELECT run_id, vin, kind, subject, severity FROM changes_latest_run ORDER BY severity_rank, vin").rows()
    assert latest == [("r2", VIN, "new_recall", "26V003000", "park_now"), ("r2", OTHER, "new_recall", "26V005000", "high")]
    counts = db.sql("SELECT run_id, kind, severity, changes, vehicles FROM change_counts ORDER BY ALL").rows()
    assert counts == [("r2", "new_recall", "high", 1, 1), ("r2", "new_recall", "park_now", 1, 1)]
    assert db.sql("SELECT count(*) FROM changes WHERE run_id IS NULL OR fetched_at IS NULL OR detected_at IS NULL").item() == 0


def test_changes_land_nowhere_else(db):
    """`changes` is written by the landing itself, never handed a frame."""
    from fleet_data.tasks.store.database import DatabaseError

    with pytest.raises(DatabaseError):
        db.land("changes", pl.DataFrame({"vin": [VIN]}), "r1")
