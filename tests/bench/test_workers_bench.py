"""Benchmark: `fleet refresh --workers 2` against `--workers 1`, and a run on a Dask LocalCluster (issue 13).

The sandbox runs in its own process, once with no latency and once with 150 ms. The fetch phase is
timed from the run's first call to its last (`api_calls.fetched_at`), so Prefect's start does not
count; wall time is printed too. `--concurrency` is per worker process, so two workers also put
twice the calls in flight. Prints the figures; asserts only that the work was done.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

from fleet_data.connectors.sandbox import Sandbox
from tests.bench.compare.fleets import fleet_vins
from tests.bench.measure import run_measured

pytestmark = pytest.mark.bench

VINS = 3000
CONCURRENCY = 32


def _refresh(fleet: Path, db: Path, sandbox: Sandbox, *flags: str) -> tuple[float, float, dict]:
    """(wall seconds, fetch-phase seconds, summary) of one `fleet refresh` in its own process."""
    command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fleet), "--db", str(db), "--lake", "", "--json",
               "--datasets", "specs", "--concurrency", str(CONCURRENCY), *flags]
    done = run_measured(command, env={"VDS_BASE_URL": sandbox.url, "VDS_API_KEY": "bench"}, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute("SELECT epoch(max(fetched_at)) - epoch(min(fetched_at)) FROM api_calls").fetchone()
    assert row is not None
    return done.wall_s, float(row[0]), json.loads(done.stdout)


@pytest.mark.timeout(3600)  # minutes by design: the suite's 300 s is for tests
def test_workers_and_dask(tmp_path):
    fleet = tmp_path / "fleet.csv"
    pl.DataFrame({"vin": sorted(fleet_vins(VINS, seed=3, only_with_data=False))}).write_csv(fleet)
    lines = [f"\nspecs for {VINS:,} VINs, --concurrency {CONCURRENCY} per worker, sandbox in its own process:"]
    for latency in ("0", "150"):
        sandbox = Sandbox.start_subprocess(["--latency-ms", latency])
        try:
            one = _refresh(fleet, tmp_path / f"one-{latency}.duckdb", sandbox, "--workers", "1")
            two = _refresh(fleet, tmp_path / f"two-{latency}.duckdb", sandbox, "--workers", "2")
        finally:
            sandbox.stop()
        for (_, _, summary) in (one, two):
            assert summary["status"] == "completed" and summary["calls"] == VINS
        lines.append(f"  {latency:>3} ms: --workers 1 fetch {one[1]:.1f} s ({VINS / one[1]:.0f} calls/s, wall {one[0]:.1f} s); "
                     f"--workers 2 fetch {two[1]:.1f} s ({VINS / two[1]:.0f} calls/s, wall {two[0]:.1f} s); "
                     f"ratio {one[1] / two[1]:.2f}")
        print(lines[-1], flush=True)

    from distributed import LocalCluster

    sandbox = Sandbox.start_subprocess(["--latency-ms", "0"])
    saved = {k: os.environ.get(k) for k in ("VDS_BASE_URL", "VDS_API_KEY")}
    os.environ.update({"VDS_BASE_URL": sandbox.url, "VDS_API_KEY": "bench"})  # the workers' environment
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster:
            dask = _refresh(fleet, tmp_path / "dask.duckdb", sandbox, "--dask", cluster.scheduler_address)
    finally:
        sandbox.stop()
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    assert dask[2]["status"] == "completed" and dask[2]["calls"] == VINS
    lines.append(f"    0 ms: Dask LocalCluster (2 worker processes) fetch {dask[1]:.1f} s "
                 f"({VINS / dask[1]:.0f} calls/s, wall {dask[0]:.1f} s)")
    print("\n".join(lines))
