"""The newest answer wins, an empty one included: what a VIN no longer has disappears.

A VIN had a lien, a title brand, an owner, an open recall; asked again, the sandbox answers 404 "no
data" (a stable answer, not a failure). Its old rows must not outlive that answer, nor come back
when an older stored answer is re-parsed.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.fetch.enrich import fetch_chunk
from fleet_data.tasks.land.landing import fetch_status_frame, land_enrichment

GONE = "1HGCM82633A004363"  # the sandbox has no data for it on any VIN endpoint
BEFORE = datetime.now(timezone.utc) - timedelta(days=2)

OLD_ROWS = {
    "history": ("history_reports", {"vin": GONE, "title_brands": ["Salvage"], "brands_record_count": 1}),
    "lien_theft": ("lien_theft_events", {"vin": GONE, "event_index": 0, "event": "Lien", "location": "TX"}),
    "ownership": ("ownership_records", {"vin": GONE, "owner_count": 1, "owners": "[]"}),
}


@pytest.fixture
def vehicle(store):
    # Runs started in order: "newest" is by run order (run_seq), and a run never started would rank before all.
    store.start_run("refresh", ["fleet.csv"], run_id="r0", started_at=BEFORE)
    store.land("vehicles", pl.DataFrame({"vin": [GONE], "unit_number": ["U1"]}), "r0")
    return store


@pytest.mark.parametrize("dataset", sorted(OLD_ROWS))
def test_no_data_after_data_clears_the_old_rows(vehicle, settings, dataset):
    db = vehicle
    table, row = OLD_ROWS[dataset]
    old = pl.DataFrame([{**row, "fetched_at": BEFORE}])
    db.land_chunk({table: old, "fetch_status": fetch_status_frame(dataset, [(GONE, BEFORE)], [])}, "r0")
    result = asyncio.run(fetch_chunk(dataset, [{"vin": GONE}], calls=Calls(settings=settings("test_enterprise"))))
    assert [v for v, _ in result.no_data] == [GONE]
    db.start_run("refresh", ["fleet.csv"], run_id="r1")
    land_enrichment(db, "r1", result)
    assert db.sql(f"SELECT count(*) FROM {table}").item() == 0
    overview = db.sql("SELECT title_brands, lien_theft_events FROM vehicle_overview").row(0)
    # Lien/theft events: 0 once lien/theft answered none ("no data" included), NULL while it was never asked
    # (sql/dictionary/vehicle_overview.toml): only the lien_theft case asked it.
    assert overview == (None, 0 if dataset == "lien_theft" else None)
    # Re-parsing the older stored answer lands it under its own, older time: it stays superseded.
    db.land(table, old, "r0")
    assert db.sql(f"SELECT count(*) FROM {table}").item() == 0


def test_a_recall_lookup_with_no_data_closes_the_vins_open_campaigns(vehicle, settings):
    db = vehicle
    db.land("recalls", pl.DataFrame([{"vin": GONE, "nhtsa_campaign_number": "20V001000", "fetched_at": BEFORE}]), "r0")
    db.land("recall_checks", pl.DataFrame([{"vin": GONE, "checked_via": "vin", "has_recalls": True, "recall_count": 1,
                                            "campaigns_listed": True, "fetched_at": BEFORE}]), "r0")
    assert db.sql("SELECT open_recall_count FROM vehicle_overview").item() == 1
    result = asyncio.run(fetch_chunk("recall_details", [{"vin": GONE}], calls=Calls(settings=settings())))
    db.start_run("refresh", ["fleet.csv"], run_id="r1")
    land_enrichment(db, "r1", result)
    assert db.sql("SELECT count(*) FROM open_recalls").item() == 0
    # No campaign listed any more, but no count either: unknown, not zero (sql/README.md, "Unknown is not zero").
    assert db.sql("SELECT open_recall_count, recall_status, recalls_checked_at > $t FROM vehicle_overview",
                  {"t": BEFORE}).row(0) == (None, "no_data", True)
    assert db.query("recall_checks_of_run", run_id="r1").rows() == [(GONE, result.no_data[0][1], "no_data")]
