"""The Parquet lake is written incrementally: a run rewrites only the files whose rows changed.

A small fleet lands in every exported table, the lake is exported; a second run changes three VINs and
the export rewrites only the files holding those VINs' rows (and the new run's), nothing else. After
each export, reading the lake gives exactly the rows of the database's tables and views: no row twice,
none missing, whatever was replaced or deleted in DuckDB.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from fleet_data.tasks.store.database import EXPORT_TABLES, open_database

T1 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
T2 = datetime(2026, 2, 5, 12, 0, tzinfo=UTC)
T3 = datetime(2026, 2, 20, 12, 0, tzinfo=UTC)
VINS = [f"1FTFW1E50KFA{n:05d}" for n in range(48)]
# Partition columns read back from the folder names: not columns of the tables themselves.
PATH_ONLY = {"vin_bucket", "valued_month", "called_month"}


def land_run(db, run_id, at, vins, *, lien_events=2, make="Ford"):
    """What a refresh lands for `vins`: roster, specs, a valuation, recalls, history, lien/theft, calls."""
    db.start_run("refresh", ["fleet.csv"], run_id=run_id, started_at=at)
    n = len(vins)
    db.land_chunk({
        "specs": pl.DataFrame({"vin": vins, "year": [2019] * n, "make": [make] * n, "model": ["F-150"] * n,
                               "fetched_at": [at] * n}),
        "market_values": pl.DataFrame({"vin": vins, "valued_on": [at.date()] * n, "retail": [30000.0] * n,
                                       "publish_date": ["2026-01-01"] * n, "fetched_at": [at] * n}),
        "recall_checks": pl.DataFrame({"vin": vins, "checked_via": ["vin"] * n, "recall_count": [1] * n,
                                       "campaigns_listed": [True] * n, "fetched_at": [at] * n}),
        "recalls": pl.DataFrame({"vin": vins, "nhtsa_campaign_number": ["24V100"] * n, "park_it": [True] * n,
                                 "fetched_at": [at] * n}),
        "history_reports": pl.DataFrame({
            "vin": vins, "brands_record_count": [0] * n, "fetched_at": [at] * n,
            "history_information": [[json.dumps({"date": "2024-05-06", "odometer": 12000, "odometer_unit": "miles"})]] * n,
        }),
        "lien_theft_events": pl.DataFrame([
            {"vin": v, "event_index": i, "event": "Lien", "details_list": [f"Date: 2022-01-0{i + 1}", "Lienholder: Bank"],
             "fetched_at": at} for v in vins for i in range(lien_events)]),
        "fetch_status": pl.DataFrame([{"vin": v, "dataset": d, "outcome": "found", "fetched_at": at}
                                      for v in vins for d in ("specs", "history", "lien_theft")]),
        "api_calls": pl.DataFrame({"call_id": [f"{run_id}-{v}" for v in vins], "endpoint": ["/specs"] * n,
                                   "vin": vins, "status": [200] * n, "units": [1] * n, "fetched_at": [at] * n}),
        "raw_responses": pl.DataFrame({"dataset": ["specs"] * n, "vin": vins, "endpoint": ["/specs"] * n,
                                       "status": [200] * n, "fetched_at": [at] * n,
                                       "body": [json.dumps({"vin": v, "make": make}) for v in vins]}),
    }, run_id)
    db.finish_run(run_id, "completed", finished_at=at)


@pytest.fixture
def db(tmp_path):
    database = open_database(tmp_path / "fleet.duckdb")
    database.land("vehicles", pl.DataFrame({"vin": VINS, "unit_number": [f"U{i}" for i in range(len(VINS))],
                                            "fleet": ["North", "South"] * (len(VINS) // 2)}), "r1", fetched_at=T1)
    database.land("failures", pl.DataFrame({"vin": VINS[:4], "dataset": ["history"] * 4, "status": [503] * 4,
                                            "fetched_at": [T1] * 4}), "r1")
    land_run(database, "r1", T1, VINS)
    yield database
    database.close()


def lake_files(lake: Path) -> dict[str, int]:
    """Every file of the lake with its modification time (ns): what an export wrote or left alone."""
    return {str(p.relative_to(lake)): p.stat().st_mtime_ns for p in lake.rglob("*") if p.is_file()}


def exported_names(db) -> list[str]:
    views = db.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'")["view_name"]
    return sorted(set(EXPORT_TABLES) | set(views))


def assert_lake_equals_database(db, lake: Path) -> None:
    """Same rows, same number of times, for every exported table and view."""
    for name in exported_names(db):
        columns = ", ".join(f'"{c}"' for c in db.columns(name))
        lake_rows = f"SELECT {columns} FROM read_parquet($glob, hive_partitioning = true)"
        stored = f'SELECT {columns} FROM "{name}"'
        params = {"glob": str(lake / name / "**" / "*.parquet")}
        counts = db.sql(f"SELECT (SELECT count(*) FROM ({lake_rows})) AS lake, (SELECT count(*) FROM ({stored})) AS db",
                        params).row(0)
        assert counts[0] == counts[1], (name, counts)
        for left, right in ((lake_rows, stored), (stored, lake_rows)):
            extra = db.sql(f"SELECT count(*) FROM ({left} EXCEPT ALL {right})", params).item()
            assert extra == 0, name


def bucket(db, vin: str) -> int:
    return db.sql("SELECT vin_bucket($v)", {"v": vin}).item()


def test_views_are_exported_and_the_lake_reads_as_the_database(db, tmp_path):
    lake = tmp_path / "lake"
    db.export_parquet(lake)
    for view in ("vehicle_overview", "open_recalls", "lien_theft_records", "odometer_readings", "latest_market_values",
                 "fleet_value_by_model", "vehicle_value_trend", "history_records"):
        assert list((lake / view).rglob("*.parquet")), view
    assert not (lake / "ownership_records").exists()  # personal data stays in DuckDB
    assert_lake_equals_database(db, lake)
    overview = pl.read_parquet(lake / "vehicle_overview", hive_partitioning=True)
    assert overview.height == len(VINS) and overview["park_now"].all()
    # Partitioned by VIN bucket, by month and by run: each VIN's rows live in one file per table.
    assert {p.name for p in (lake / "specs").iterdir()} == {f"vin_bucket={b}" for b in {bucket(db, v) for v in VINS}}
    assert [p.name for p in (lake / "api_calls").iterdir()] == ["called_month=2026-01-01"]
    assert [p.name for p in (lake / "api_calls" / "called_month=2026-01-01").iterdir()] == ["run_id=r1"]


def test_a_second_run_rewrites_only_the_files_of_what_changed(db, tmp_path):
    lake = tmp_path / "lake"
    first = db.export_lake(lake)
    assert first.removed == [] and len(first.written) == len(lake_files(lake))
    before = lake_files(lake)

    # Three VINs in three different buckets change; a fourth VIN shares no bucket with them.
    changed = []
    for vin in VINS:
        if bucket(db, vin) not in {bucket(db, v) for v in changed}:
            changed.append(vin)
        if len(changed) == 3:
            break
    touched = {bucket(db, v) for v in changed}
    assert len([v for v in VINS if bucket(db, v) not in touched]) > 20
    land_run(db, "r2", T2, changed, lien_events=1, make="Lincoln")  # specs replaced, fewer lien events
    # A re-sent identical answer moves from run r1 to r2 in raw_responses: it must not stay in r1's file.
    db.land("raw_responses", pl.DataFrame({"dataset": ["specs"], "vin": [VINS[-1]], "endpoint": ["/specs"],
                                           "status": [200], "fetched_at": [T3],
                                           "body": [json.dumps({"vin": VINS[-1], "make": "Ford"})]}), "r2")

    second = db.export_lake(lake)
    after = lake_files(lake)
    rewritten = {f for f, mtime in after.items() if before.get(f) != mtime}
    assert rewritten == {str(p.relative_to(lake)) for p in second.written}
    # Only the files of the empty change feed and its view: r2's new decodes go to their partitions.
    assert sorted(str(p.relative_to(lake)) for p in second.removed) == ["changes/part-0.parquet",
                                                                        "changes_latest_run/part-0.parquet"]
    assert second.kept == len(after) - len(rewritten)
    for path in rewritten:
        parts = dict(seg.split("=", 1) for seg in Path(path).parent.parts[1:])
        if "vin_bucket" in parts:
            assert int(parts["vin_bucket"]) in touched, path
        if "run_id" in parts:
            assert parts["run_id"] in ("r1", "r2"), path
    by_table: dict[str, set[str]] = {}
    for path in rewritten:
        by_table.setdefault(Path(path).parts[0], set()).add(path)
    assert by_table["specs"] == {f"specs/vin_bucket={b}/part-0.parquet" for b in touched}
    assert by_table["market_values"] == {f"market_values/valued_month=2026-02-01/vin_bucket={b}/part-0.parquet"
                                         for b in touched}
    assert by_table["api_calls"] == {"api_calls/called_month=2026-02-01/run_id=r2/part-0.parquet"}
    assert by_table["raw_responses"] == {"raw_responses/run_id=r1/part-0.parquet", "raw_responses/run_id=r2/part-0.parquet"}
    assert by_table["runs"] == {"runs/part-0.parquet"}
    assert by_table["recall_checks"] == {"recall_checks/run_id=r2/part-0.parquet"}  # r1's checks untouched
    for untouched in ("vehicles", "failures", "rejected_rows", "recall_batches", "plate_resolutions"):
        assert untouched not in by_table, untouched
    assert len(rewritten) < len(after) / 3
    assert_lake_equals_database(db, lake)

    # Replaced rows are in the lake once: the new specs, one lien event, the moved answer in r2 only.
    def read(name: str) -> pl.DataFrame:
        return pl.read_parquet(lake / name / "**" / "*.parquet", hive_partitioning=True)

    specs = read("specs")
    assert specs.height == len(VINS) and specs.filter(pl.col("make") == "Lincoln")["vin"].sort().to_list() == sorted(changed)
    assert read("lien_theft_events").filter(pl.col("vin").is_in(changed)).height == 3
    moved = read("raw_responses").filter(pl.col("vin") == VINS[-1])
    assert moved["run_id"].to_list() == ["r2"]

    third = db.export_lake(lake)  # nothing changed since: nothing written
    assert third.written == [] and third.removed == [] and lake_files(lake) == after


def test_rows_deleted_in_the_database_leave_the_lake(db, tmp_path):
    lake = tmp_path / "lake"
    db.export_lake(lake)
    gone = VINS[0]
    # A newer "no data" answer removes the VIN's history and lien/theft events (fetch_status.sql). Newer is by
    # run order: r2 starts after r1 (a run never started would rank before every run, its answer the older).
    db.start_run("refresh", ["fleet.csv"], run_id="r2", started_at=T2)
    db.land("fetch_status", pl.DataFrame([{"vin": gone, "dataset": d, "outcome": "no_data", "fetched_at": T2}
                                          for d in ("history", "lien_theft")]), "r2")
    # Every market value of January goes: its month folder goes with it.
    db.connection.execute("DELETE FROM market_values")
    db.connection.complete()
    export = db.export_lake(lake)
    assert export.removed and all(not p.exists() for p in export.removed)
    assert not (lake / "market_values" / "valued_month=2026-01-01").exists()
    assert_lake_equals_database(db, lake)
    assert pl.read_parquet(lake / "history_reports" / "**" / "*.parquet").filter(pl.col("vin") == gone).height == 0


def test_a_lake_written_before_is_taken_over(db, tmp_path):
    """The previous exporter wrote one unpartitioned file per table (and a staging folder if killed)."""
    lake = tmp_path / "lake"
    (lake / "specs").mkdir(parents=True)
    db.connection.execute(f"COPY specs TO '{lake / 'specs' / 'part-0.parquet'}' (FORMAT parquet)")
    db.connection.complete()
    (lake / ".specs.writing").mkdir()
    (lake / "specs" / "vin_bucket=3").mkdir()
    (lake / "specs" / "vin_bucket=3" / "part-0.parquet.tmp").write_bytes(b"cut short")
    db.export_lake(lake)
    assert not (lake / ".specs.writing").exists()
    assert not (lake / "specs" / "part-0.parquet").exists()
    assert not list(lake.rglob("*.tmp"))
    assert_lake_equals_database(db, lake)


def test_views_reading_personal_data_are_not_exported(db, tmp_path):
    db.connection.execute("CREATE VIEW owners_by_vin AS SELECT vin, owners FROM ownership_records")
    db.connection.complete()
    db.export_lake(tmp_path / "lake")
    assert not (tmp_path / "lake" / "owners_by_vin").exists()


def test_an_empty_table_still_reads(db, tmp_path):
    lake = tmp_path / "lake"
    export = db.export_lake(lake, ["plate_resolutions", "rejected_rows"])
    assert set(export.tables) == {"plate_resolutions", "rejected_rows"}
    for name in export.tables:
        assert pl.read_parquet(lake / name / "**" / "*.parquet").height == 0


def test_partitions_read_in_small_batches_are_whole(db, tmp_path, monkeypatch):
    """The changed partitions' rows stream in batches, sorted by partition; a partition spread over several batches
    (here 3 rows a batch) is written whole, once, and a second run's rows land beside the first's."""
    from fleet_data.tasks.store import lake as lake_module

    monkeypatch.setattr(lake_module, "BATCH_ROWS", 3)
    lake = tmp_path / "lake"
    first = db.export_lake(lake)
    assert len(first.written) == len(lake_files(lake))
    assert_lake_equals_database(db, lake)
    land_run(db, "r2", T2, VINS[:20], make="Lincoln")
    db.export_lake(lake)
    assert_lake_equals_database(db, lake)


def new_vins(db, count: int, in_bucket: int | None = None) -> list[str]:
    """VINs not in the fixture's fleet (in one VIN bucket if asked)."""
    found = []
    for n in range(100, 10_000):
        vin = f"1FTFW1E50KFB{n:05d}"
        if in_bucket is None or bucket(db, vin) == in_bucket:
            found.append(vin)
        if len(found) == count:
            return found
    raise AssertionError("not enough VINs")


def land_new_vehicles(db, run_id: str, at: datetime, vins: list[str]) -> None:
    """A run that lists `vins` for the first time and answers everything for them."""
    db.land("vehicles", pl.DataFrame({"vin": vins, "unit_number": [f"N{v[-5:]}" for v in vins],
                                      "fleet": ["North"] * len(vins)}), run_id, fetched_at=at)
    land_run(db, run_id, at, vins)


def partition_files(lake: Path, table: str, vin: str, db) -> list[str]:
    folder = lake / table / f"vin_bucket={bucket(db, vin)}"
    return sorted(p.name for p in folder.iterdir())


def test_new_vehicles_are_added_to_their_partitions_as_files_of_their_own(db, tmp_path):
    """A run that answers VINs new to the store: in each partition where their rows are the only change, they go
    into a file of their own and the partition's file stays as it was. A later change to a row already in the lake
    writes the partition whole again, as one file, the added ones deleted first."""
    lake = tmp_path / "lake"
    db.export_lake(lake, run_id="r1")
    before = lake_files(lake)
    added = new_vins(db, 3)
    land_new_vehicles(db, "r2", T2, added)

    export = db.export_lake(lake, run_id="r2")
    assert_lake_equals_database(db, lake)
    after = lake_files(lake)
    for vin in added:
        for table in ("specs", "fetch_status", "vin_status", "vehicle_overview", "lien_theft_events"):
            assert partition_files(lake, table, vin, db) == ["part-0.parquet", "part-1.parquet"], (table, vin)
            file = f"{table}/vin_bucket={bucket(db, vin)}/part-0.parquet"
            assert after[file] == before[file], file  # not written again
    appended = [p for p in export.written if p.name == "part-1.parquet"]
    assert {p.parent.parent.name for p in appended} >= {"specs", "vehicles", "vin_status", "vehicle_overview"}
    assert export.kept == len(after) - len(export.written)

    # The same export again: nothing written, the added files counted in their partitions.
    again = db.export_lake(lake, run_id="r2")
    assert again.written == [] and again.removed == [] and lake_files(lake) == after

    # A row already in the lake changes: the partition is written whole, as one file.
    land_run(db, "r3", T3, added[:1], make="Lincoln")
    export = db.export_lake(lake, run_id="r3")
    assert_lake_equals_database(db, lake)
    assert partition_files(lake, "specs", added[0], db) == ["part-0.parquet"]
    assert lake / "specs" / f"vin_bucket={bucket(db, added[0])}" / "part-1.parquet" in export.removed
    assert pl.read_parquet(lake / "specs" / "**" / "*.parquet").filter(pl.col("make") == "Lincoln")["vin"].to_list() \
        == added[:1]


def test_without_the_run_every_changed_partition_is_written_whole(db, tmp_path):
    lake = tmp_path / "lake"
    db.export_lake(lake)
    added = new_vins(db, 2)
    land_new_vehicles(db, "r2", T2, added)
    db.export_lake(lake)
    assert_lake_equals_database(db, lake)
    assert not list(lake.rglob("part-1.parquet"))


def test_a_partition_holds_at_most_a_few_files(db, tmp_path):
    """Each run adds a file to the same partition until it holds MOST_FILES; the next change writes it whole."""
    from fleet_data.tasks.store.lake import MOST_FILES

    lake = tmp_path / "lake"
    db.export_lake(lake, run_id="r1")
    target = bucket(db, VINS[0])
    vins = new_vins(db, MOST_FILES, in_bucket=target)
    for n, vin in enumerate(vins, start=2):
        land_new_vehicles(db, f"r{n}", T2, [vin])
        db.export_lake(lake, run_id=f"r{n}")
        assert_lake_equals_database(db, lake)
        files = partition_files(lake, "specs", vin, db)
        assert len(files) == (n if n <= MOST_FILES else 1), (n, files)


def test_an_answered_vins_changed_row_is_not_appended_beside_its_old_one(db, tmp_path):
    """A partition's sums decide: rows of an answered VIN that replace rows the partition holds (changed specs) are
    not added as a file beside them (the old row would be read too): the partition is written whole."""
    lake = tmp_path / "lake"
    db.export_lake(lake, run_id="r1")
    added = new_vins(db, 1)
    land_new_vehicles(db, "r2", T2, added)
    # One of the fixture's VINs is answered again in r2 with changed specs: its partition must not just grow.
    land_run(db, "r2b", T2, VINS[:1], make="Lincoln")
    db.export_lake(lake, run_id="r2b")
    assert_lake_equals_database(db, lake)
    assert partition_files(lake, "specs", VINS[0], db) == ["part-0.parquet"]
