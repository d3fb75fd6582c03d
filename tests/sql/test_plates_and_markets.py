"""Migration 0005: where a roster VIN came from, the plate lookups, and datasets that do not apply."""

from datetime import datetime, timezone

import polars as pl

from fleet_data.tasks.store.database import EXPORT_TABLES

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)
T1 = datetime(2026, 2, 5, 12, 0, tzinfo=timezone.utc)
V1, V2 = "1HGCM82633A004352", "1FTFW1E50KFA12345"


def test_a_vin_from_the_file_is_file_and_one_found_by_plate_is_plate_until_the_file_lists_it(db):
    first = db.start_run(started_at=T0)
    db.land("vehicles", pl.DataFrame({"vin": [V1], "plate": ["ABC123"], "state": ["TX"]}), first)
    db.land("vehicles", pl.DataFrame({"vin": [V2], "plate": ["XYZ9"], "state": ["TX"], "vin_source": ["plate"]}), first)
    rows = db.sql("SELECT vin, vin_source, extra FROM vehicles ORDER BY vin").rows()
    assert rows == [(V2, "plate", None), (V1, "file", None)]  # vin_source is a column, not an extra
    second = db.start_run(started_at=T1)
    db.land("vehicles", pl.DataFrame({"vin": [V2]}), second)
    assert db.sql("SELECT vin_source FROM vehicles WHERE vin = $v", {"v": V2}).item() == "file"


def test_plate_resolutions_keep_every_lookup_and_landing_twice_changes_nothing(db):
    run = db.start_run(started_at=T0)
    lookups = pl.DataFrame({
        "plate": ["ABC123", "GB12XYZ", "NOPE1"], "state": ["TX", None, "ON"], "country": ["US", "GB", "CA"],
        "vin": [V1, V2, None], "outcome": ["found", "found", "not_found"], "status": [200, 200, 404],
        "message": [None, None, "No data found for this plate"], "fetched_at": [T0, T0, T0],
    })
    for _ in range(2):
        db.land("plate_resolutions", lookups, run)
    assert db.sql("SELECT count(*) FROM plate_resolutions").item() == 3  # a plate without a state too
    later = db.start_run(started_at=T1)
    db.land("plate_resolutions", lookups.head(1).with_columns(pl.lit(T1).alias("fetched_at")), later)
    assert db.sql("SELECT count(*) FROM plate_resolutions WHERE plate = 'ABC123'").item() == 2  # a history
    fresh = db.query("fresh_plate_resolutions", found_after=T0, not_found_after=T0, future_after=None, service=None)
    assert sorted(fresh.select("plate", "state", "country", "vin", "outcome").rows(), key=str) == sorted(
        [("ABC123", "TX", "US", V1, "found"), ("GB12XYZ", None, "GB", V2, "found"),
         ("NOPE1", "ON", "CA", None, "not_found")], key=str)  # the latest lookup of each plate
    # "Not found" has its own, shorter window: past it the plate is asked again.
    later_only = db.query("fresh_plate_resolutions", found_after=T1, not_found_after=T1, future_after=None,
                          service=None)
    assert later_only.select("plate", "outcome").rows() == [("ABC123", "found")]
    assert "plate_resolutions" in EXPORT_TABLES


def test_run_datasets_count_not_applicable(db):
    run = db.start_run(started_at=T0)
    db.land("run_datasets", pl.DataFrame({"dataset": ["lien_theft"], "roster": [10], "not_applicable": [3],
                                          "skipped_fresh": [2], "planned": [5]}), run)
    assert db.sql("SELECT roster, not_applicable, skipped_fresh, planned FROM run_datasets").rows() == [(10, 3, 2, 5)]
