"""Benchmark (not a timed test): land 1,000,000 specs rows into a DuckDB file, then land them again.

Run with `make bench` (or `pytest -m bench -s tests/bench/test_landing_bench.py`). The rows are
shaped exactly like `tasks.staging.specs_frame` output (the widest frame the enrichment lands,
nested colours, equipment and warranties included) and go through `Database.land`, one call of
1,000,000 rows, the way the ingest lands a whole roster in one transaction. Each pass runs in a fresh
process measured by `tests/bench/measure.py`: the first inserts, the second takes the MERGE's
update path for every row (what a forced refresh does). Asserts only the table's row count. It sizes the
files `Database.land` leaves: the working store `fleet.duckdb.working` (there is no publish here).
"""

from __future__ import annotations

import json
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from fleet_data.tasks.land.frames import SPECS_SCHEMA
from fleet_data.tasks.store.files import working_path
from tests.bench.measure import run_measured

pytestmark = pytest.mark.bench
ROWS = 1_000_000
MODELS = [("Honda", "Accord", "Sedan"), ("Ford", "F-150", "Pickup"), ("Toyota", "RAV4", "SUV"),
          ("Tesla", "Model 3", "Sedan"), ("Chevrolet", "Silverado", "Pickup"), ("Nissan", "Altima", "Sedan")]


def make_specs_rows(rows: int = ROWS, seed: int = 1) -> pl.DataFrame:
    """`rows` decodes of distinct VINs, typed as `staging.SPECS_SCHEMA`, with varied values."""
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(MODELS), rows)
    make, model, body = (np.array([m[i] for m in MODELS])[pick] for i in range(3))
    colour = np.array(["White", "Black", "Silver", "Blue", "Red"])[rng.integers(0, 5, rows)]
    frame = pl.DataFrame({
        "vin": [f"1HGCM8263{n:08d}" for n in range(rows)],
        "year": rng.integers(2005, 2027, rows).astype(np.int32),
        "make": make, "model": model, "type": body, "colour": colour,
        "trim": np.array(["Base", "EX", "LX", "Limited", "Sport"])[rng.integers(0, 5, rows)],
        "miles": rng.choice([36_000, 50_000, 60_000], rows).astype(np.int32),
    })
    at = datetime(2026, 11, 1, tzinfo=timezone.utc)
    return frame.with_columns(
        pl.format("{} {} {}", "trim", "model", "type").alias("style"),
        pl.lit("United States").alias("made_in"),
        pl.when(pl.col("type") == "Pickup").then(2).otherwise(4).cast(pl.Int32).alias("doors"),
        pl.when(pl.col("make") == "Tesla").then(pl.lit("Electric")).otherwise(pl.lit("Gasoline")).alias("fuel_type"),
        pl.lit("2.4L I4").alias("engine"),
        pl.lit(4, pl.Int32).alias("engine_cylinders"),
        pl.lit("8-Speed Automatic").alias("transmission"),
        pl.lit("FWD").alias("drivetrain"),
        pl.concat_list([pl.struct(category=pl.lit("Exterior"), name=pl.col("colour")),
                        pl.struct(category=pl.lit("Interior"), name=pl.lit("Black"))]).alias("colors"),
        pl.concat_list([pl.struct(name=pl.lit("Air Conditioning"), value=pl.lit("Std.")),
                        pl.struct(name=pl.lit("Cruise Control"), value=pl.lit("Opt.")),
                        pl.struct(name=pl.lit("Navigation"), value=pl.col("trim"))]).alias("equipment"),
        pl.concat_list([pl.struct(type=pl.lit("Basic"), miles=pl.col("miles"), months=pl.lit(36, pl.Int32)),
                        pl.struct(type=pl.lit("Powertrain"), miles=pl.lit(60_000, pl.Int32),
                                  months=pl.lit(60, pl.Int32))]).alias("warranties"),
        pl.lit(False).alias("is_international"),
        pl.lit(at).alias("fetched_at"),
    ).select(list(SPECS_SCHEMA)).cast(SPECS_SCHEMA)  # type: ignore[arg-type]


# One pass: read the staged rows, land them in one call, count the table. Figures as one JSON line.
LAND = textwrap.dedent(
    """
    import json, sys, time
    import polars as pl
    from fleet_data.tasks.store.database import open_database
    rows = pl.read_parquet(sys.argv[1])
    db = open_database(sys.argv[2])
    run_id = db.start_run("bench")
    started = time.perf_counter()
    staged = db.land("specs", rows, run_id)
    land_s = time.perf_counter() - started
    in_table = db.sql("SELECT count(*) AS n FROM specs").item()
    db.close()  # DuckDB writes the new rows to the file here: part of the cost of landing them
    close_s = time.perf_counter() - started - land_s
    high_water_mb = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024
    print(json.dumps({"staged": staged, "land_s": land_s, "close_s": close_s, "in_table": in_table,
                      "high_water_mb": high_water_mb}))
    """
)


def _land_pass(rows_path: Path, db_path: Path) -> dict:
    measured = run_measured([sys.executable, "-c", LAND, str(rows_path), str(db_path)], timeout=600)
    assert measured.returncode == 0, measured.stderr[-2000:]
    figures = json.loads(measured.stdout.strip().splitlines()[-1])
    return {**figures, "wall_s": measured.wall_s, "peak_rss_mb": measured.peak_rss_mb}


@pytest.mark.timeout(900)
def test_land_one_million_specs_rows(tmp_path):
    rows_path = tmp_path / "specs_1m.parquet"
    make_specs_rows().write_parquet(rows_path)
    db_path = tmp_path / "fleet.duckdb"
    first = _land_pass(rows_path, db_path)
    second = _land_pass(rows_path, db_path)
    for name, figures in (("first (insert)", first), ("second (same rows: MERGE update)", second)):
        print(f"\nlanding {ROWS:,} specs rows in one call, {name}: {figures['land_s']:.2f} s "
              f"({ROWS / figures['land_s']:,.0f} rows/s) + closing the file {figures['close_s']:.2f} s, "
              f"process wall {figures['wall_s']:.2f} s, "
              f"peak RSS {figures['peak_rss_mb']:.0f} MB sampled, {figures['high_water_mb']:.0f} MB high-water; "
              f"rows in the table {figures['in_table']:,}")
    # `Database.land` writes the working store beside `--db` (tasks/store/published.py); only a run's publish writes
    # `fleet.duckdb` itself, and this bench lands without one: size the files that exist.
    files = sorted(p for p in tmp_path.iterdir() if p.name.startswith(db_path.name))
    assert working_path(db_path) in files, f"no working store among {[p.name for p in files]}"
    print("database files: " + ", ".join(f"{p.name} {p.stat().st_size / 1e6:.0f} MB" for p in files))
    assert first["staged"] == second["staged"] == ROWS
    assert first["in_table"] == ROWS, "the first landing lost rows"
    assert second["in_table"] == ROWS, "landing the same rows again changed the row count"
