"""The Parquet lake: one folder per table and view, partitioned, readable by duckdb, polars and pandas.

How it is kept up to date run after run (only what changed is written): tests/tasks/test_lake.py.
"""

from datetime import date, datetime, timezone
from decimal import Decimal

import duckdb
import pandas as pd
import polars as pl

from fleet_data.tasks.ingest.fleet_files import read_fleet
from fleet_data.tasks.store.database import EXPORT_TABLES

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)
T1 = datetime(2026, 2, 5, 12, 0, tzinfo=timezone.utc)


def test_export_is_readable_everywhere(db, tmp_path):
    run = db.start_run("refresh", started_at=T0)
    db.land("vehicles", read_fleet(["data/sample_fleet.csv"]).roster, run)
    db.land(
        "market_values",
        pl.DataFrame(
            {
                "vin": ["1HGCM82633A004352"] * 2,
                "valued_on": [date(2026, 1, 5), date(2026, 2, 5)],
                "retail": [9000.0, 8500.0],
                "valuation_groups": [[{"kind": "retail", "tier": "clean", "adjusted": 1.0}]] * 2,
                "fetched_at": [T0, T1],
            }
        ),
        run,
    )
    db.land("specs", pl.DataFrame({"vin": ["1HGCM82633A004352"], "colors": [[{"category": "Exterior", "name": "Blue"}]]}), run)
    lake = tmp_path / "lake"
    written = db.export_parquet(lake)
    assert set(written) == set(EXPORT_TABLES) | set(db.exported_views())
    assert "vehicle_overview" in written and "ownership_records" not in written
    assert sorted(p.name for p in (lake / "market_values").iterdir()) == ["valued_month=2026-01-01", "valued_month=2026-02-01"]

    for table in written:
        folder = lake / table
        expected = db.sql(f"SELECT count(*) AS n FROM {table}")["n"].item()
        with duckdb.connect() as con:
            n = con.execute("SELECT count(*) FROM read_parquet($glob, hive_partitioning = true)",
                            {"glob": str(folder / "**" / "*.parquet")}).fetchone()[0]  # fmt: skip
        assert n == expected, table
        assert pl.scan_parquet(folder, hive_partitioning=True).collect().height == expected, table
        assert len(pd.read_parquet(folder)) == expected, table

    values = pl.read_parquet(lake / "market_values", hive_partitioning=True).sort("valued_on")
    # Money to the cent and months as dates, in the lake as in DuckDB (issue 21).
    assert values["retail"].to_list() == [Decimal("9000.00"), Decimal("8500.00")]
    assert values["valuation_groups"].to_list()[0][0]["adjusted"] == Decimal("1.00")
    assert values["valued_month"].to_list() == [date(2026, 1, 1), date(2026, 2, 1)]
    with duckdb.connect() as con:
        types = con.execute("SELECT DISTINCT typeof(valued_month), typeof(retail), typeof(publish_date) "
                            "FROM read_parquet($glob, hive_partitioning = true)",
                            {"glob": str(lake / "market_values" / "**" / "*.parquet")}).fetchall()
    assert types == [("DATE", "DECIMAL(12,2)", "DATE")]
    assert pd.read_parquet(lake / "specs")["colors"][0][0]["name"] == "Blue"
    vehicles = pd.read_parquet(lake / "vehicles")
    assert str(vehicles["fetched_at"].dt.tz) == "UTC"


def test_export_replaces_previous_export(db, tmp_path):
    lake = tmp_path / "lake"
    db.land("market_values", pl.DataFrame({"vin": ["X" * 17], "valued_on": [date(2025, 12, 1)], "fetched_at": [T0]}), "r")
    db.export_parquet(lake, ["market_values"])
    db.sql("SELECT 1")
    db.connection.execute("DELETE FROM market_values")
    db.connection.complete()
    db.land("market_values", pl.DataFrame({"vin": ["X" * 17], "valued_on": [date(2026, 1, 1)], "fetched_at": [T1]}), "r")
    db.export_parquet(lake, ["market_values"])
    assert [p.name for p in (lake / "market_values").iterdir()] == ["valued_month=2026-01-01"]
    assert not list(lake.glob(".*"))
