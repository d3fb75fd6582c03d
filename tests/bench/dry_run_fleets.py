"""Fleets for the dry-run benches: the ingest bench's generator, with a depot column that brings a
4,000,000-row file to about 300 MB (75 bytes a row, as the issue's file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from tests.bench.test_ingest_bench import make_big_fleet

DEPOTS = ["North Yard, 1200 Industrial Pkwy", "South Depot, 55 Harbor Rd", "Exec Garage, 9 Main St"]


def make_wide_fleet(path: Path, rows: int, seed: int = 1) -> None:
    """`make_big_fleet` plus a `depot_address` column (about 25 bytes a row)."""
    narrow = path.with_suffix(".narrow.csv")
    make_big_fleet(narrow, rows, seed)
    rng = np.random.default_rng(seed + 1)
    (pl.scan_csv(narrow, infer_schema=False)
     .with_columns(pl.Series("depot_address", np.array(DEPOTS)[rng.integers(0, len(DEPOTS), rows)]))
     .sink_csv(path))
    narrow.unlink()
