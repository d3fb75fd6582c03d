"""The view vin_status: one status per roster VIN and dataset, rows in, statuses out (issue 30, point 1).

Each VIN below is built as a run would leave it (answers, failures, what runs left pending, recall checks),
landed through the store's own landing SQL into a real DuckDB file; the view must say what each is and why.
The registry's macros the view uses (sql/views/00_registry.sql) are generated from the planner's own rule,
and held to it here.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from fleet_data.tasks.ingest.markets import REGISTRY_SQL, registry_sql, with_market
from fleet_data.tasks.land import frames as staging

T0 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
US_VIN, ABROAD_VIN, CANADA_VIN, SETTLED_VIN, DETAILS_VIN = (
    "1HGCM82633A004352", "WBA3A5C56G0915102", "2T1BURHE2PE979297", "1HGCM82633A004353", "1HGCM82633A004363")


def _answered(rows: list[tuple[str, str, str, datetime]]) -> pl.DataFrame:
    return pl.DataFrame([{"vin": v, "dataset": d, "outcome": o, "fetched_at": at} for v, d, o, at in rows],
                        schema={"vin": pl.String, "dataset": pl.String, "outcome": pl.String, "fetched_at": staging.TS})


def _left(rows: list[tuple[str, str, str]], started: datetime, at: datetime) -> pl.DataFrame:
    return pl.DataFrame([{"vin": v, "dataset": d, "reason": r, "run_started_at": started, "fetched_at": at}
                         for v, d, r in rows])


def _checks(rows: list[tuple[str, str, int | None, bool, bool | None, datetime]]) -> pl.DataFrame:
    return pl.DataFrame([{"vin": v, "checked_via": via, "batch_id": None, "has_recalls": has, "recall_count": count,
                          "campaigns_listed": listed, "fetched_at": at} for v, via, count, listed, has, at in rows],
                        schema=staging.RECALL_CHECK_SCHEMA)


@pytest.fixture
def statuses(db) -> dict[tuple[str, str], dict]:
    db.start_run("refresh", [], run_id="r1", started_at=T0)
    db.land("vehicles", pl.DataFrame({
        "vin": [US_VIN, ABROAD_VIN, CANADA_VIN, SETTLED_VIN, DETAILS_VIN],
        "unit_number": ["U-1", "U-2", "U-3", "U-4", "U-5"], "state": ["TX", None, "ON", "CA", "NV"]}), "r1")
    db.land("specs", pl.DataFrame({"vin": [ABROAD_VIN], "is_international": [True], "fetched_at": [T0]}), "r1")
    t1 = T0 + timedelta(minutes=1)
    db.land("fetch_status", _answered([
        (US_VIN, "specs", "found", t1), (US_VIN, "history", "no_data", t1), (US_VIN, "recalls", "found", t1),
        (US_VIN, "market_value", "found", T0 - timedelta(days=40)),  # an older answer: now failed
        (ABROAD_VIN, "specs", "found", t1), (CANADA_VIN, "recalls", "found", t1),
        (SETTLED_VIN, "lien_theft", "found", T0 - timedelta(days=1)), (DETAILS_VIN, "recalls", "found", t1)]), "r1")
    db.land("recall_checks", _checks([
        (US_VIN, "batch", 2, False, True, t1),  # counted recalls: campaign details asked next
        (CANADA_VIN, "batch", 1, False, True, t1), (CANADA_VIN, "vin", 1, True, True, t1 + timedelta(seconds=5)),
        (DETAILS_VIN, "batch", 3, False, True, t1)]), "r1")
    failed = {"attempts": 2, "fetched_at": t1 + timedelta(seconds=30)}
    db.land("failures", staging.failures_frame([
        {**failed, "vin": US_VIN, "dataset": "market_value", "status": 500, "message": "Internal server error",
         "retryable": True, "endpoint": "/v2/marketvalue"},
        {**failed, "vin": US_VIN, "dataset": "recalls", "status": 503, "message": "busy", "retryable": True,
         "endpoint": "/v1/recalls"},  # after the count: the campaign lookup failed, not the check
    ]), "r1")
    left = T0 + timedelta(minutes=5)
    db.land("left_pending", _left([(US_VIN, "lien_theft", "retry window closed"),
                                   (CANADA_VIN, "specs", "max-units reached"),
                                   (SETTLED_VIN, "lien_theft", "429 quota")], T0 - timedelta(days=2), left), "r1")
    rows = db.sql("SELECT * FROM vin_status").to_dicts()
    return {(r["vin"], r["dataset"]): r for r in rows}


def test_each_vin_and_dataset_has_one_status_and_its_reason(statuses):
    got = {key: row["status"] for key, row in statuses.items()}
    assert got == {
        (US_VIN, "specs"): "answered", (US_VIN, "market_value"): "failed", (US_VIN, "history"): "no_data",
        (US_VIN, "lien_theft"): "pending", (US_VIN, "recalls"): "answered", (US_VIN, "recall_details"): "failed",
        (US_VIN, "ownership"): "never_asked",
        (ABROAD_VIN, "specs"): "answered", (ABROAD_VIN, "ownership"): "never_asked",
        **{(ABROAD_VIN, d): "not_applicable" for d in ("market_value", "history", "lien_theft", "recalls")},
        (CANADA_VIN, "specs"): "pending", (CANADA_VIN, "market_value"): "never_asked",
        (CANADA_VIN, "history"): "not_applicable", (CANADA_VIN, "lien_theft"): "not_applicable",
        (CANADA_VIN, "recalls"): "answered", (CANADA_VIN, "recall_details"): "answered",
        (CANADA_VIN, "ownership"): "never_asked",
        # left pending two days ago, answered a day ago: settled
        (SETTLED_VIN, "lien_theft"): "answered",
        **{(SETTLED_VIN, d): "never_asked" for d in ("specs", "market_value", "history", "recalls", "ownership")},
        # counted recalls, and no campaign lookup since: waiting for one (a run stopped before the details)
        **{(DETAILS_VIN, d): "never_asked" for d in ("specs", "market_value", "history", "lien_theft", "ownership")},
        (DETAILS_VIN, "recalls"): "answered", (DETAILS_VIN, "recall_details"): "pending",
    }
    failed = statuses[(US_VIN, "market_value")]
    assert (failed["reason"], failed["http_status"], failed["retryable"], failed["attempts"], failed["run_id"]) == (
        "Internal server error", 500, True, 2, "r1")
    assert failed["answered_at"] == T0 - timedelta(days=40)  # the older answer is still there, and said
    pending = statuses[(US_VIN, "lien_theft")]
    assert (pending["reason"], pending["since_run_id"], pending["run_id"]) == ("retry window closed", "r1", "r1")
    assert pending["since"] == T0 + timedelta(minutes=5)
    abroad = statuses[(ABROAD_VIN, "history")]
    assert abroad["market"] == "international" and abroad["reason"] == (
        "registered outside North America; history is answered for US")
    assert statuses[(CANADA_VIN, "history")]["reason"] == "registered in CA; history is answered for US"
    details = statuses[(DETAILS_VIN, "recall_details")]
    assert details["since_run_id"] == "r1" and "not looked up" in details["reason"]
    assert statuses[(US_VIN, "specs")]["reason"] is None


def test_a_vin_left_pending_again_keeps_when_its_wait_began(db):
    """Runs that leave a VIN-dataset pending one after the other are one wait; an answer in between ends it."""
    db.land("vehicles", pl.DataFrame({"vin": [US_VIN, SETTLED_VIN]}), "r1")
    for n, run in enumerate(("r1", "r2", "r3")):
        started = T0 + timedelta(hours=n)
        db.start_run("refresh", [], run_id=run, started_at=started)
        if run == "r3":  # between r2 and r3, SETTLED_VIN answered
            db.land("fetch_status", _answered([(SETTLED_VIN, "specs", "found", started - timedelta(minutes=1))]), run)
        db.land("left_pending", _left([(US_VIN, "specs", f"stopped in {run}"), (SETTLED_VIN, "specs", "stopped")],
                                      started, started + timedelta(minutes=2)), run)
    db.land("left_pending", _left([(US_VIN, "specs", "stopped in r3")], T0 + timedelta(hours=2),
                                  T0 + timedelta(hours=2, minutes=2)), "r3")  # the same run's rows again
    rows = db.sql("SELECT vin, since_run_id, run_id, reason FROM vin_status WHERE dataset = 'specs' ORDER BY vin").rows()
    assert rows == [(US_VIN, "r1", "r3", "stopped in r3"), (SETTLED_VIN, "r3", "r3", "stopped")]


def test_the_registry_macros_are_the_generated_ones():
    assert REGISTRY_SQL.read_text(encoding="utf-8") == registry_sql(), \
        "run `python -m fleet_data.tasks.ingest.markets` after changing a dataset's markets or the market rule"


def test_the_market_macro_is_the_planners_rule(db):
    """vehicle_market (SQL) gives what tasks/ingest/markets.py with_market (polars) gives, on every combination of
    awkward inputs: names and codes of countries, states of three countries, VINs of both kinds, decoded or not."""
    vins = ["1HGCM82633A004352", "WBA3A5C56G0915102", "JTDKB20U093000001"]
    states = [None, "TX", " tx\t", "ON", "qc", "NSW", "WA", "NT", "XX", ""]
    countries = [None, "US", "USA", " méxico ", "Canada", "\nde ", "United Kingdom", "Narnia", "ZZ", ""]
    decoded = [None, True, False]
    grid = pl.DataFrame(list(itertools.product(vins, states, countries, decoded)),
                        schema={"vin": pl.String, "state": pl.String, "country": pl.String,
                                "specs_international": pl.Boolean}, orient="row")
    expected = with_market(grid)["market"].to_list()
    db.connection.register("grid", grid.to_arrow())
    got = db.sql("SELECT vehicle_market(vin, state, country, specs_international) AS m FROM grid")["m"].to_list()
    assert got == expected
