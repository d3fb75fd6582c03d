"""Benchmark (not a timed test): read, validate and de-duplicate a 1,000,000-row fleet CSV.

Run with `make bench` (or `pytest -m bench -s tests/bench/test_ingest_bench.py`). Prints the ingest's
own time and the wall time and peak RSS of a fresh subprocess that does only the ingest, measured
by `tests/bench/measure.py` like every other contender.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from fleet_data.tasks.ingest.vins import check_digit_expr
from tests.bench.measure import run_measured

ROWS = 1_000_000
WMIS = ["1FT", "1FA", "1G1", "1GC", "1HG", "2HG", "1N4", "4T1", "5TD", "2T1", "3VW", "5YJ", "1C4",
        "KMH", "KNA", "JTD", "WBA", "WDD", "WAU", "YV1"]  # fmt: skip
LETTERS = list("ABCDEFGHJKLMNPRSTUVWXYZ0123456789")


def make_big_fleet(path: Path, rows: int = ROWS, seed: int = 1) -> None:
    """Deterministic fleet: valid VINs (check digit computed), ~2% duplicates, ~1% flawed values."""
    rng = np.random.default_rng(seed)
    letters = np.array(LETTERS)
    vds = ["".join(r) for r in letters[rng.integers(0, len(LETTERS), size=(rows, 5))]]
    frame = pl.DataFrame(
        {
            "wmi": np.array(WMIS)[rng.integers(0, len(WMIS), rows)],
            "vds": vds,
            "year": np.array(list("CDEFGHJKLMNPRS"))[rng.integers(0, 14, rows)],
            "plant": letters[rng.integers(0, len(LETTERS), rows)],
            "serial": rng.integers(0, 1_000_000, rows),
        }
    ).with_columns(
        (pl.col("wmi") + pl.col("vds") + "0" + pl.col("year") + pl.col("plant") + pl.col("serial").cast(pl.String).str.zfill(6)).alias("body")
    )
    frame = frame.with_columns(
        (pl.col("body").str.slice(0, 8) + check_digit_expr("body") + pl.col("body").str.slice(9)).alias("vin")
    )
    vins = frame["vin"].to_numpy().astype(object)
    dup = rng.random(rows) < 0.02
    vins[dup] = vins[rng.integers(0, rows, dup.sum())]
    lower = rng.random(rows) < 0.05
    vins[lower] = np.char.lower(vins[lower].astype(str)).astype(object)
    bad = rng.random(rows) < 0.01
    vins[bad] = np.array(["", "N/A", "1HGCM82634A004352", "1HGCM8263IA004352"], dtype=object)[rng.integers(0, 4, bad.sum())]
    pl.DataFrame(
        {
            "unit_number": [f"U{i:07d}" for i in range(rows)],
            "vin": vins.tolist(),
            "plate": np.array(["ABC1234", "XYZ9876", "KLM5555"])[rng.integers(0, 3, rows)],
            "state": np.array(["CA", "TX", "NY", "FL"])[rng.integers(0, 4, rows)],
            "mileage": rng.integers(0, 200_000, rows),
            "fleet": np.array(["North", "South", "Exec"])[rng.integers(0, 3, rows)],
        }
    ).write_csv(path)


MEASURE = textwrap.dedent(
    """
    import json, sys, time
    t0 = time.perf_counter()
    from fleet_data.tasks.ingest.fleet_files import read_fleet
    t1 = time.perf_counter()
    result = read_fleet([sys.argv[1]])
    t2 = time.perf_counter()
    # The kernel's exact high-water mark for this process (ru_maxrss would count the parent's pages at fork).
    high_water_mb = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024
    print(json.dumps({"import_s": t1 - t0, "ingest_s": t2 - t1, "high_water_mb": high_water_mb, **result.summary()}))
    """
)


@pytest.mark.bench
def test_ingest_one_million_rows(tmp_path):
    path = tmp_path / "fleet_1m.csv"
    make_big_fleet(path)
    size_mb = path.stat().st_size / 1e6
    runs = []
    for _ in range(3):  # best of three: the machine is shared, the slowest run says more about it than us
        measured = run_measured([sys.executable, "-c", MEASURE, str(path)], timeout=300)
        assert measured.returncode == 0, measured.stderr[-2000:]
        runs.append({**json.loads(measured.stdout.strip().splitlines()[-1]), "wall_s": measured.wall_s,
                     "peak_rss_mb": measured.peak_rss_mb})
    best = min(runs, key=lambda r: r["ingest_s"])
    assert best["rows_in"] == ROWS
    assert best["rows_in"] == best["valid"] + best["duplicates"] + best["rejected"]
    print(
        f"\ningest of {ROWS:,} rows ({size_mb:.0f} MB CSV): best {best['ingest_s']:.2f} s of "
        f"{[round(r['ingest_s'], 2) for r in runs]} ({ROWS / best['ingest_s']:,.0f} rows/s), process wall "
        f"{best['wall_s']:.2f} s, peak RSS {best['peak_rss_mb']:.0f} MB sampled, "
        f"{best['high_water_mb']:.0f} MB high-water (python+polars import "
        f"{best['import_s']:.2f} s); valid {best['valid']:,}, duplicates {best['duplicates']:,}, "
        f"rejected {best['rejected']:,}"
    )
