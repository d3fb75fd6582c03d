"""The refresh flow against the sandbox: exact plans, no double spending, stops, faults."""

from __future__ import annotations

import os

import pytest

from fleet_data.connectors.sandbox import FaultConfig
from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import RefreshOptions

pytestmark = pytest.mark.usefixtures("prefect_server")

ALL = ["specs", "market_value", "history", "lien_theft", "recalls"]
PER_VIN_ENDPOINT = {"specs": "/specs", "market_value": "/v2/marketvalue", "history": "/history", "lien_theft": "/v1/lien-theft"}


def run(fleet, db, **kw):
    kw.setdefault("lake", None)
    kw.setdefault("chunk_size", 16)
    return refresh_fleet([fleet], RefreshOptions(db=db, **kw))


def test_plan_and_its_estimate_are_exact_and_a_second_run_spends_nothing(service, fleet_file, db_path, read, tmp_path):
    sandbox = service()
    fleet = fleet_file(40)
    planned = run(fleet, db_path, dry_run=True)
    assert planned["status"] == "planned"
    assert sandbox.count() == 0  # a dry run makes no call
    assert {d: planned["datasets"][d]["planned"] for d in ALL} == {d: 40 for d in ALL}
    assert planned["estimated_units"] == 5 * 40  # 4 per-VIN lookups + 1 batch unit per VIN

    done = run(fleet, db_path, lake=str(tmp_path / "lake"))
    assert done["status"] == "completed"
    for dataset, endpoint in PER_VIN_ENDPOINT.items():
        assert sandbox.count(endpoint) == done["datasets"][dataset]["planned"] == 40  # one call per due VIN, no more
    assert sandbox.count("/v1/recalls-batch/submit") == 1
    assert sandbox.units(os.environ["VDS_API_KEY"], "recalls") >= 40
    # What we recorded as spent is what the service billed, call for call.
    spent = read(db_path, "SELECT sum(units), count(*) FROM api_calls")[0]
    assert spent == (sum(u["units"] for u in sandbox.stats()["units"]), sandbox.count())
    assert done["units"] == spent[0]
    nothing_lost = read(db_path, "SELECT dataset, count(*) FROM fetch_status GROUP BY ALL ORDER BY ALL")
    assert nothing_lost == sorted((d, 40) for d in ALL)

    before = sandbox.count()
    again = run(fleet, db_path)
    assert sandbox.count() == before  # fresh answers are not asked for again
    assert again["units"] == 0 and again["calls"] == 0
    assert all(d["skipped_fresh"] == 40 for d in again["datasets"].values())


def test_force_refetches_and_valuations_keep_history(service, fleet_file, db_path, read):
    sandbox = service()
    fleet = fleet_file(10)
    run(fleet, db_path, datasets=["market_value"])
    run(fleet, db_path, datasets=["market_value"], force=True)
    assert sandbox.count("/v2/marketvalue") == 20
    # The same day and request replaces the valuation; the fetch log still shows both runs' calls.
    assert read(db_path, "SELECT count(DISTINCT run_id) FROM api_calls")[0][0] == 2


def test_quota_stop_leaves_the_rest_pending_and_the_next_run_takes_them(service, fleet_file, db_path, read):
    sandbox = service("test_quota_12")
    fleet = fleet_file(40)
    first = run(fleet, db_path, datasets=["specs"], chunk_size=8, concurrency=4)
    specs = first["datasets"]["specs"]
    assert first["status"] == "partial"
    assert "429" in specs["stop_reason"]
    assert specs["found"] == 12
    assert specs["failed"] == 0 and read(db_path, "SELECT count(*) FROM failures")[0][0] == 0  # pending, not failed
    assert specs["found"] + specs["no_data"] + specs["pending"] == 40
    landed = read(db_path, "SELECT count(*) FROM fetch_status WHERE dataset = 'specs'")[0][0]
    assert landed == specs["found"] + specs["no_data"]

    service("another_standard_key")
    before = sandbox.count("/specs", key="another_standard_key")
    second = run(fleet, db_path, datasets=["specs"], chunk_size=8)
    assert second["datasets"]["specs"]["planned"] == specs["pending"]
    assert sandbox.count("/specs", key="another_standard_key") - before == specs["pending"]
    assert second["status"] == "completed"


def test_credit_stop_spends_nothing_more(service, fleet_file, db_path, read):
    sandbox = service("test_prepaid_5")
    fleet = fleet_file(20)
    result = run(fleet, db_path, datasets=["history"], chunk_size=5, concurrency=1)
    history = result["datasets"]["history"]
    assert "402" in history["stop_reason"]
    assert history["found"] == 5 and history["failed"] == 0
    assert history["pending"] == 20 - history["found"] - history["no_data"]
    assert sandbox.units("test_prepaid_5") == 5


def test_max_units_refuses_a_plan_that_costs_more(service, fleet_file, db_path):
    sandbox = service()
    result = run(fleet_file(10), db_path, max_units=49)  # 5 datasets x 10 VINs = 50 units
    assert result["status"] == "refused" and "50" in result["message"]
    assert sandbox.count() == 0


def test_max_units_stops_cleanly_when_reached(service, fleet_file, db_path, read):
    sandbox = service()
    fleet = fleet_file(16)
    # Exactly the plan's price: the campaign details priced after the batch no longer fit.
    result = run(fleet, db_path, max_units=16 * 5, datasets=["specs", "recalls", "history", "lien_theft", "market_value"])
    spent = sum(u["units"] for u in sandbox.stats()["units"])
    assert spent <= 16 * 5 and result["units"] == spent
    # Lookups that found nothing were not billed, so part of the budget is left for campaign details;
    # what it cannot cover is pending, never failed, and the run says why.
    planned, found, failed, pending, stop_reason = read(
        db_path, "SELECT planned, found, failed, pending, stop_reason FROM run_datasets WHERE dataset = 'recall_details'")[0]
    assert found + pending == planned and failed == 0
    assert spent + pending > 16 * 5 or pending == 0
    assert pending == 0 or (stop_reason == "max-units reached" and result["status"] == "partial")


def test_faults_at_ten_percent_still_land_every_vin(service, fleet_file, db_path, read):
    sandbox = service()
    sandbox.set_faults(FaultConfig(rate=0.06, statuses=[502, 503, 504], drop_rate=0.02, malformed_rate=0.02,
                                   retry_after_seconds=0, seed=11))
    result = run(fleet_file(30), db_path, chunk_size=10)
    assert sandbox.count(status=502) + sandbox.count(status=503) + sandbox.count(status=504) + sandbox.count(status=0) > 0
    assert result["status"] == "completed"
    assert read(db_path, "SELECT count(*) FROM fetch_status")[0][0] == 30 * 5
    assert read(db_path, "SELECT count(*) FROM failures")[0][0] == 0
    retried = read(db_path, "SELECT count(*) FROM api_calls WHERE attempt > 1")[0][0]
    assert retried > 0


def test_failures_land_with_reasons_and_are_retried_next_run(service, fleet_file, db_path, read, tmp_path, monkeypatch):
    sandbox = service()
    monkeypatch.setenv("VDS_MAX_RETRY_AFTER", "0")  # the sandbox asks for 60 s between retries
    import polars as pl

    fleet = fleet_file(5)
    rows = pl.read_csv(fleet, infer_schema=False)
    broken = "1HGCM82693A000502"  # valid check digit; the sandbox answers 502 for it, always
    vin_col = next(c for c in rows.columns if c.lower() == "vin")
    rows = pl.concat([rows, rows.head(1).with_columns(pl.lit(broken).alias(vin_col))])
    path = tmp_path / "with_broken.csv"
    rows.write_csv(path)
    first = refresh_fleet([str(path)], RefreshOptions(db=db_path, lake=None, datasets=["specs"]))
    assert first["datasets"]["specs"]["failed"] == 1
    failure = read(db_path, "SELECT vin, dataset, status, retryable, attempts FROM failures")
    assert failure == [(broken, "specs", 502, True, 4)]  # 1 + 3 retries, then recorded
    refresh_fleet([str(path)], RefreshOptions(db=db_path, lake=None, datasets=["specs"]))
    assert sandbox.count("/specs") == 5 + 4 + 4  # the good VINs once; the broken one 4 attempts, twice
    assert read(db_path, "SELECT attempts FROM failures")[0][0] == 8


def test_a_webhook_replaces_polling(service, fleet_file, db_path, read):
    sandbox = service()
    sandbox.set_batch_rate(8)  # 20 VINs: the batch takes about 2.5 s, several polls' worth
    result = run(fleet_file(20), db_path, datasets=["recalls"], webhook_listen="127.0.0.1:0")
    assert result["datasets"]["recalls"]["found"] == 20
    delivered = [w for w in sandbox.webhooks() if not w.get("error")]
    assert len(delivered) == 1 and delivered[0]["payload"]["status"] == "completed"
    assert sandbox.count("/v1/recalls-batch/status") == 2  # once at the start, once when notified


def test_ownership_only_when_asked_and_allowed(service, fleet_file, db_path, read):
    sandbox = service()
    fleet = fleet_file(12)
    default = run(fleet, db_path, dry_run=True)
    assert "ownership" not in default["datasets"]  # never fetched unless asked
    refused = run(fleet, db_path, datasets=["ownership"], concurrency=2, chunk_size=4)
    ownership = refused["datasets"]["ownership"]
    assert "403" in ownership["stop_reason"] and ownership["failed"] == 0
    assert ownership["pending"] == 12 - ownership["found"] - ownership["no_data"] == 12
    assert sandbox.units(os.environ["VDS_API_KEY"]) == 0
    service("test_enterprise")
    allowed = run(fleet, db_path, datasets=["ownership"])["datasets"]["ownership"]
    assert allowed["found"] + allowed["no_data"] == 12 and allowed["found"] > 0
    owners = read(db_path, "SELECT sum(owner_count) FROM ownership_records")[0][0]
    assert sandbox.units("test_enterprise") == owners  # billed per owner returned


def test_chunks_of_a_dataset_take_turns_so_concurrency_bounds_calls_in_flight(service, fleet_file, db_path, read):
    # Two chunks of a dataset run at once (one fetching while the other lands), but only one calls:
    # without turns, 2 chunks x 3 workers would put 6 specs calls in flight.
    sandbox = service()
    sandbox.set_faults(FaultConfig(latency_ms=(40, 40)))
    sandbox.reset_stats()
    result = run(fleet_file(36), db_path, datasets=["specs"], chunk_size=6, concurrency=3)
    specs = result["datasets"]["specs"]
    assert result["status"] == "completed" and specs["found"] + specs["no_data"] == 36
    assert 2 <= sandbox.peak_in_flight() <= 3
    assert read(db_path, "SELECT count(*), count(DISTINCT vin) FROM api_calls WHERE endpoint = '/specs'") == [(36, 36)]


def test_a_grown_fleet_adds_its_new_vehicles_to_the_lake_beside_what_was_there(service, fleet_file, db_path, tmp_path):
    """A refresh of a fleet with new rows writes their answers into the lake as files of their own: the files the
    first refresh wrote for the other vehicles stay as they were (tasks/store/lake.py), and the lake reads as the
    database."""
    import duckdb

    service()
    lake = tmp_path / "lake"
    run(fleet_file(24), db_path, lake=str(lake), datasets=["specs"])
    first = {p: p.stat().st_mtime_ns for p in (lake / "specs").rglob("*.parquet")}
    run(fleet_file(40), db_path, lake=str(lake), datasets=["specs"])
    added = [p for p in (lake / "specs").rglob("*.parquet") if p not in first]
    had_files = {p.parent for p in first}
    assert any(p.parent in had_files for p in added)  # 16 buckets: 16 new VINs fall in some that 24 filled
    for path in added:  # beside a partition's file, or the first of a partition new to the lake
        assert path.name == ("part-1.parquet" if path.parent in had_files else "part-0.parquet"), path
    assert all(p.stat().st_mtime_ns == mtime for p, mtime in first.items())
    in_lake = f"read_parquet('{lake}/specs/**/*.parquet')"
    with duckdb.connect(db_path + ".working", read_only=True) as con:
        stored = con.sql(f"SELECT vin, make FROM specs EXCEPT ALL SELECT vin, make FROM {in_lake}").fetchall()
        ((stored_rows, lake_rows),) = con.sql(f"SELECT (SELECT count(*) FROM specs), (SELECT count(*) FROM {in_lake})").fetchall()
    assert stored == [] and stored_rows == lake_rows
