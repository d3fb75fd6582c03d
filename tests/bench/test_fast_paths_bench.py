"""Benchmark: what needs no service and no flow answers without Prefect (issues 12 and 19: under 3 s each).

Each command runs as a user runs it, `python -m fleet_data.flows.cli ...` in its own process, three times; printed:
the median wall time and the median CPU seconds of the process (user + system, from its rusage). The
database is the sample fleet's roster with every dataset answered, built without Prefect. Asserts only
that each command did what it says, never a time.
"""

from __future__ import annotations

import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from fleet_data.connectors.config import EMBEDDED_SANDBOX
from fleet_data.connectors.sandbox import run_sandbox
from fleet_data.tasks.exitcodes import REFUSED
from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.ingest.fleet_files import read_fleet
from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.store.published import publish_file as publish

pytestmark = pytest.mark.bench
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_fleet.csv"
DATASETS = ("specs", "market_value", "history", "lien_theft", "recalls")


def _database(path: Path) -> None:
    """The sample roster with a fresh answer for every VIN and dataset, published; no open failure."""
    roster = read_fleet([str(SAMPLE)]).roster
    now = datetime.now(UTC)
    with open_database(str(path)) as db:
        db.start_run("refresh", [str(SAMPLE)], run_id="bench-1", service=EMBEDDED_SANDBOX)  # what the commands call
        db.land_chunk({"vehicles": roster}, "bench-1")
        vins = db.query("roster_vins")["vin"].to_list()
        answered = pl.DataFrame([{"vin": v, "dataset": d, "outcome": "found", "fetched_at": now,
                                  "service": EMBEDDED_SANDBOX} for v in vins for d in DATASETS],
                                schema={"vin": pl.String, "dataset": pl.String, "outcome": pl.String,
                                        "fetched_at": staging.TS, "service": pl.String})
        db.land("fetch_status", answered, "bench-1")
        db.finish_run("bench-1", "completed", counts={"rows_in": roster.height, "valid": roster.height})
    publish(str(path))


def _measure(argv: list[str], expect: str, service: dict[str, str] | None = None, code: int = 0) -> tuple[float, float]:
    """Median (wall s, CPU s) of three runs of `fleet argv`; each must end with `code` and print `expect`.
    `service`: the VDS_* variables to run with (none: the command needs no service)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VDS_", "PREFECT_API"))} | {"PYTHONPATH": str(ROOT)}
    env |= service or {}
    walls, cpus = [], []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "fleet_data.flows.cli", *argv], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300, check=False)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        assert done.returncode == code, done.stderr[-2000:]
        assert expect in done.stdout + done.stderr, (done.stdout + done.stderr)[-2000:]
    return statistics.median(walls), statistics.median(cpus)


def test_fast_paths(tmp_path):
    db = tmp_path / "fleet.duckdb"
    _database(db)
    new = tmp_path / "new" / "fleet.duckdb"
    cases = {
        "fleet refresh --dry-run (sample fleet, new database)": (
            ["refresh", str(SAMPLE), "--db", str(new), "--dry-run"], "planned"),
        "fleet refresh --dry-run (sample fleet, every answer fresh)": (
            ["refresh", str(SAMPLE), "--db", str(db), "--dry-run"], "planned"),
        "fleet status": (["status", "--db", str(db)], "Last runs"),
        "fleet backfill --failures, none open": (
            ["backfill", "--failures", "--db", str(db), "--lake", ""], "nothing to do"),
        "fleet backfill --reparse, nothing stored": (
            ["backfill", "--reparse", "--db", str(db), "--lake", ""], "nothing to do"),
        # Issue 19: a real run (recorded, roster landed, lake and report written) with nothing due, no Prefect.
        "fleet refresh, nothing due (sample fleet, lake and report)": (
            ["refresh", str(SAMPLE), "--db", str(db), "--lake", str(tmp_path / "lake"), "--no-plates"], "completed"),
    }
    refused = tmp_path / "refused" / "fleet.duckdb"
    lines = [(f"\nfast paths ({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"{datetime.now(UTC):%Y-%m-%d}; median of 3 runs, each its own process):")]
    for name, (argv, expect) in cases.items():
        wall, cpu = _measure(argv, expect)
        lines.append(f"  {name:<60} {wall:5.2f} s wall {cpu:5.2f} s CPU")
    # Issue 27: a key the service refuses, said by the free key check before Prefect starts (24 s before).
    with run_sandbox() as sandbox:
        wall, cpu = _measure(["refresh", str(SAMPLE), "--db", str(refused), "--lake", ""], "refused the key",
                             {"VDS_API_KEY": "test_unknown", "VDS_BASE_URL": sandbox.url}, code=REFUSED)
    lines.append(f"  {'fleet refresh, key refused (sample fleet; runs recorded, report)':<60} {wall:5.2f} s wall "
                 f"{cpu:5.2f} s CPU")
    print("\n".join(lines))
    assert not new.parent.exists()  # the dry runs wrote nothing
