"""Benchmark: a whole `fleet refresh` of a 3,000-VIN fleet against the sandbox in another process.

Prints wall time, calls per second and the time to a second, fresh run; asserts only that work was done.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from fleet_data.connectors.sandbox import Sandbox
from tests.bench.compare.fleets import fleet_vins
from tests.bench.measure import refresh_cli

pytestmark = pytest.mark.bench


def _fleet(path: Path, n: int) -> None:
    vins = sorted(fleet_vins(n, seed=1, only_with_data=False))
    pl.DataFrame({"vin": vins, "state": "CA", "mileage": 42_000}).write_csv(path)


def _refresh(fleet: Path, db: Path, sandbox: Sandbox) -> tuple[float, dict]:
    return refresh_cli(fleet, db, {"VDS_BASE_URL": sandbox.url, "VDS_API_KEY": "bench"}, timeout=900)


def test_refresh_throughput(tmp_path):
    fleet = tmp_path / "fleet.csv"
    _fleet(fleet, 3000)
    sandbox = Sandbox.start_subprocess(["--latency-ms", "20"])
    try:
        first_time, first = _refresh(fleet, tmp_path / "fleet.duckdb", sandbox)
        second_time, second = _refresh(fleet, tmp_path / "fleet.duckdb", sandbox)
    finally:
        sandbox.stop()
    print(f"\nrefresh of 3,000 VINs (5 datasets, sandbox latency 20 ms): {first_time:.1f} s, "
          f"{first['calls']} calls, {first['calls'] / first_time:.0f} calls/s including Prefect's start; "
          f"second run {second_time:.1f} s with {second['calls']} calls")
    assert first["status"] == "completed" and second["calls"] == 0
