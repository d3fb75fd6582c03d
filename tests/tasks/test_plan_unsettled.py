"""What earlier runs left unsettled is planned again (issue 30, points 1 and 2), in a real DuckDB file.

Every VIN below answered an hour ago, so freshness alone would plan none of them. What a run left pending is
planned, fresh or not; so is a failure worth asking again (a 5xx, an answer that never came); a failure that
cannot change by asking again (a 4xx) is not, until the dataset's window has passed since it. The dry run
(`fleet refresh --dry-run`, from the published file read-only) plans the same and says why and what it costs.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pytest

from fleet_data.tasks.ingest.fleet_files import read_fleet
from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.outputs.preview import preview_refresh
from fleet_data.tasks.outputs.summary import plan_text
from fleet_data.tasks.plan.due import DueRule, make_plan
from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.store.published import publish_file

NOW = datetime.now(timezone.utc)
HOUR_AGO = NOW - timedelta(hours=1)
ANSWERED, LEFT, FAILED_500, FAILED_400, OLD_400, DETAILED, CHECKED = (
    "1HGCM82633A004352", "1HGCM82653A004353", "1HGCM82683A004363", "1HGCM82693A000404", "1HGCM82653A000500",
    "1HGCM82693A000502", "1HGCM82603A000503")  # valid check digits: the dry run reads them from a file
VINS = [ANSWERED, LEFT, FAILED_500, FAILED_400, OLD_400, DETAILED, CHECKED]


@pytest.fixture
def db_path(tmp_path) -> Path:
    path = tmp_path / "fleet.duckdb"
    with open_database(path) as db:
        db.start_run("refresh", [], run_id="r0", started_at=HOUR_AGO - timedelta(minutes=1))
        db.land("vehicles", pl.DataFrame({"vin": VINS, "state": ["TX"] * len(VINS)}), "r0")
        answered = [{"vin": v, "dataset": d, "outcome": "found", "fetched_at": HOUR_AGO}
                    for v in VINS for d in ("specs", "recalls") if v not in (FAILED_400, OLD_400) or d == "recalls"]
        db.land("fetch_status", pl.DataFrame(answered, schema={"vin": pl.String, "dataset": pl.String,
                                                               "outcome": pl.String, "fetched_at": staging.TS}), "r0")
        db.land("left_pending", pl.DataFrame({"vin": [LEFT], "dataset": ["specs"], "reason": ["retry window closed"],
                                              "run_started_at": [HOUR_AGO + timedelta(minutes=1)],
                                              "fetched_at": [HOUR_AGO + timedelta(minutes=5)]}), "r0")
        failure = {"dataset": "specs", "attempts": 2, "fetched_at": HOUR_AGO + timedelta(minutes=2), "endpoint": "/specs"}
        db.land("failures", staging.failures_frame([
            {**failure, "vin": FAILED_500, "status": 500, "message": "Internal server error", "retryable": True},
            {**failure, "vin": FAILED_400, "status": 400, "message": "Invalid VIN", "retryable": False},
            {**failure, "vin": OLD_400, "status": 400, "message": "Invalid VIN", "retryable": False,
             "fetched_at": NOW - timedelta(days=400)},  # older than specs' year-long window: asked again
        ]), "r0")
        db.land("recall_checks", pl.DataFrame([  # counted recalls an hour ago; no campaign lookup followed
            {"vin": CHECKED, "checked_via": "batch", "has_recalls": True, "recall_count": 2, "campaigns_listed": False,
             "fetched_at": HOUR_AGO}], schema=staging.RECALL_CHECK_SCHEMA), "r0")
    publish_file(path)
    return path


def test_the_next_refresh_plans_what_was_left_pending_and_the_failures_worth_asking_again(db_path, tmp_path):
    with open_database(db_path) as db:
        db.start_run("refresh", [], run_id="r1")
        db.land("vehicles", pl.DataFrame({"vin": VINS, "state": ["TX"] * len(VINS)}), "r1")
        plan = make_plan(db, "r1", ["specs", "recalls"], tmp_path / "due", rule=DueRule(now=NOW))
    specs = plan.datasets["specs"]
    assert sorted(pl.read_parquet(specs.path)["vin"].to_list()) == sorted([LEFT, FAILED_500, OLD_400])
    assert (specs.due, specs.pending_due, specs.failed_due, specs.estimated_units) == (3, 1, 2, 3)
    assert plan.datasets["recalls"].due == 0 and plan.recall_details_waiting == 1  # CHECKED's campaigns
    text = plan_text(plan)
    assert "1 left pending and 2 failed before: 3 units" in text
    assert "(+ up to 1 for recall campaign details)" in text


def test_the_dry_run_plans_them_from_the_published_file_and_prices_them(db_path, tmp_path):
    fleet_csv = tmp_path / "fleet.csv"
    fleet_csv.write_text("vin,state\n" + "".join(f"{v},TX\n" for v in VINS), encoding="utf-8")
    before = db_path.stat().st_mtime_ns
    preview = preview_refresh(read_fleet([str(fleet_csv)]), db_path, "dry", ["specs", "recalls"])
    assert preview.summary["datasets"]["specs"]["planned"] == 3
    assert preview.summary["estimated_units"] == 3
    assert "1 left pending and 2 failed before: 3 units" in preview.plan
    assert not preview.nothing_due and db_path.stat().st_mtime_ns == before  # nothing written


def test_campaigns_waiting_to_be_looked_up_are_something_to_do(db_path, tmp_path):
    """A refresh whose only work is the campaign details a stopped run left is not answered as "nothing due"
    (which starts no flow, so they would wait for the recalls to go stale)."""
    with open_database(db_path) as db:
        db.start_run("refresh", [], run_id="r2")
        db.land("vehicles", pl.DataFrame({"vin": VINS, "state": ["TX"] * len(VINS)}), "r2")
        plan = make_plan(db, "r2", ["recalls"], tmp_path / "due", rule=DueRule(now=NOW))
    assert plan.datasets["recalls"].due == 0 and plan.recall_details_waiting == 1
    assert not plan.nothing_due
