"""Benchmark: what a refresh costs when there is little to do, at 100,000 VINs (issue 27's fixed costs).

A 100,000-VIN fleet's specs are answered once by the sandbox in another process (0 ms latency); then, each as a
user runs it, in its own process, on a copy of that store and its lake:
- nothing due: the same fleet again (no call, no Prefect), three times;
- 1,000 new VINs: the fleet with 1,000 more rows, three times, with Prefect's shared server already running.

Prints each run's wall time, CPU (the command's process tree; the shared server is not its child) and peak memory,
and the published file's size before and after. Asserts only that the work was done: no call when nothing is due,
1,000 when 1,000 VINs are new.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import sys
from pathlib import Path

import polars as pl
import psutil
import pytest

from fleet_data.connectors.sandbox import Sandbox
from fleet_data.tasks.store.published import _fingerprint, published_record_path
from tests.bench.compare.fleets import fleet_vins
from tests.bench.measure import run_measured

pytestmark = pytest.mark.bench

VINS, NEW = 100_000, 1_000
RUNS = 3


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _refresh(fleet: Path, db: Path, lake: Path, env: dict[str, str]) -> tuple[float, float, float, dict]:
    """`fleet refresh --datasets specs` in its own process: (wall s, CPU s, peak MiB, its JSON summary)."""
    before = _children_cpu()
    done = run_measured([sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fleet), "--db", str(db),
                         "--lake", str(lake), "--datasets", "specs", "--json"], env=env, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.wall_s, _children_cpu() - before, done.peak_rss_mb, json.loads(done.stdout)


def _copy(base: Path, to: Path) -> tuple[Path, Path]:
    """The base store, its published file and its lake, copied as one folder; the published file's record
    follows the copy (a copy is a new file: the run would take it for one written to since it was published)."""
    shutil.copytree(base, to)
    db = to / "fleet.duckdb"
    published_record_path(db).write_text(json.dumps(_fingerprint(db)))  # as a publish records it
    return db, to / "lake"


def _stop_shared_server(home: Path) -> None:
    state = home / "fleet-server" / "server.json"
    if state.exists():
        pid = json.loads(state.read_text())["pid"]
        if psutil.pid_exists(pid):
            for process in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
                process.kill()


def _line(label: str, runs: list[tuple[float, float, float, dict]]) -> str:
    walls, cpus, peaks = [r[0] for r in runs], [r[1] for r in runs], [r[2] for r in runs]
    return (f"{label}: wall {statistics.median(walls):.2f} s (runs {', '.join(f'{w:.2f}' for w in walls)}), "
            f"CPU {statistics.median(cpus):.2f} s, peak {max(peaks):.0f} MiB")


def test_fixed_costs_at_100k(tmp_path):
    vins = fleet_vins(VINS + NEW, seed=27, only_with_data=False)
    fleet, grown = tmp_path / "fleet.csv", tmp_path / "fleet-grown.csv"
    pl.DataFrame({"vin": vins[:VINS], "state": "CA"}).write_csv(fleet)
    pl.DataFrame({"vin": vins, "state": "CA"}).write_csv(grown)
    home = tmp_path / "prefect-home"
    sandbox = Sandbox.start_subprocess(["--latency-ms", "0"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VDS_", "PREFECT_API", "FLEET_"))}
    env |= {"VDS_BASE_URL": sandbox.url, "VDS_API_KEY": "bench", "PREFECT_HOME": str(home),
            "FLEET_PREFECT_SERVER": "shared", "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    try:
        base = tmp_path / "base"
        base.mkdir()
        wall, _, _, built = _refresh(fleet, base / "fleet.duckdb", base / "lake", env)
        assert built["status"] == "completed", built
        print(f"\nthe base store: {VINS:,} VINs' specs answered and landed in {wall:.1f} s "
              f"({built['calls']:,} calls); published file {(base / 'fleet.duckdb').stat().st_size:,} bytes")

        nothing = []
        db, lake = _copy(base, tmp_path / "nothing")
        size = db.stat().st_size
        for _ in range(RUNS):  # one store: a scheduled refresh that finds nothing due, again and again
            nothing.append(_refresh(fleet, db, lake, env))
            assert nothing[-1][3]["calls"] == 0
        print(_line(f"nothing due on {VINS:,} VINs", nothing)
              + f"; published file {size:,} -> {db.stat().st_size:,} bytes")

        new = []
        for n in range(RUNS):  # each from the base: 1,000 VINs new to it
            db, lake = _copy(base, tmp_path / f"new-{n}")
            new.append(_refresh(grown, db, lake, env))
            assert new[-1][3]["datasets"]["specs"]["planned"] == NEW
        print(_line(f"{NEW:,} new VINs in a {VINS + NEW:,}-VIN fleet, shared Prefect server running", new))
    finally:
        sandbox.stop()
        _stop_shared_server(home)
