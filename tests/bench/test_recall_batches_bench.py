"""Benchmark (not a timed test): a 1,000,000-row fleet file through ingest and the recall batches.

Run with `make bench` (or `pytest -m bench -s tests/bench/test_recall_batches_bench.py`).

What the figure includes: one fresh process runs the refresh's steps for `--datasets recalls` with
the product's own functions, in the flow's order (flows/refresh.py): read the file, land the roster,
plan, then `run_recall_batches` (ledger, submit 10,000 VINs a batch, poll the status, fetch the
results, land `recall_checks`, `fetch_status`, the ledger, the calls and the raw answers per batch),
then close the run. Its wall time and peak RSS are measured by `tests/bench/measure.py`.

What it leaves out, and why:
- Prefect. The flow's tasks are thin wrappers around these functions; its temporary API server
  (~15 s to start here) would be in the wall time and its memory in another process.
- Recall campaign details (tasks/recalls/details.py). About a third of the sandbox's VINs have open
  recalls and this fleet has no specs to group them by model, so details would be ~300,000 per-VIN
  calls: a per-VIN enrichment figure (measured elsewhere), not a batch one.
The sandbox runs in its own process with `--batch-rate 200000` VINs/s so the figure measures us, not
the emulated service's processing delay; its CPU seconds are printed so the two can be told apart.
"""

from __future__ import annotations

import json
import math
import os
import sys
import textwrap

import pytest

from fleet_data.connectors.sandbox import Sandbox
from tests.bench.measure import run_measured
from tests.bench.test_ingest_bench import ROWS, make_big_fleet

pytestmark = pytest.mark.bench
KEY = "bench_recall_batches"
BATCH_SIZE = 10_000  # the service's limit per batch

# The refresh's steps for recalls only, as flows/refresh.py orders them; one JSON line of figures.
PIPELINE = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from pathlib import Path
    from fleet_data.connectors import Settings
    from fleet_data.tasks.ingest.fleet_files import read_fleet
    from fleet_data.tasks.plan.due import make_plan, read_vins
    from fleet_data.tasks.recalls.batches import run_recall_batches
    from fleet_data.tasks.store.database import open_database

    fleet, db_path, batch_size = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    staging = db_path.resolve().parent / "staging"
    times = {}
    started = time.perf_counter()
    ingest = read_fleet([fleet])
    with open_database(db_path) as db:
        run_id = db.start_run("refresh", [fleet], {"datasets": ["recalls"]})
        db.land_chunk({"vehicles": ingest.roster, "rejected_rows": ingest.rejected}, run_id)
        roster = db.sql("SELECT count(*) FROM vehicles WHERE run_id = $r", {"r": run_id}).item()
        times["ingest_s"] = time.perf_counter() - started
        plan = make_plan(db, run_id, ["recalls"], staging / run_id)
        recalls = plan.datasets["recalls"]
        vins = read_vins(recalls.path) if recalls.path else []
        times["plan_s"] = time.perf_counter() - started - times["ingest_s"]
        outcome = asyncio.run(run_recall_batches(db, run_id, vins, calls=Calls(Settings.from_env()),
                                                 batches=BatchOptions(staging / "recall_batches", batch_size)))
        times["batches_s"] = time.perf_counter() - started - times["ingest_s"] - times["plan_s"]
        db.finish_run(run_id, "completed", counts=ingest.summary(), units_used=outcome.units)
        landed = db.sql("SELECT count(*) AS checks, count(DISTINCT vin) AS vins FROM recall_checks "
                        "WHERE run_id = $r AND checked_via = 'batch'", {"r": run_id}).to_dicts()[0]
        ledger = db.sql("SELECT count(*) AS batches, count(DISTINCT idempotency_key) AS keys, "
                        "count(*) FILTER (WHERE status = 'completed') AS completed FROM recall_batches").to_dicts()[0]
    times["high_water_mb"] = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024
    print(json.dumps({**times, "summary": ingest.summary(), "roster": roster, "due": len(vins),
                      "outcome": vars(outcome), "landed": landed, "ledger": ledger}))
    """
)


def _cpu_seconds(pid: int) -> float:
    """User+system CPU of a process (Linux): the sandbox's share of the machine."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.timeout(900)
def test_recall_batches_one_million_vins(tmp_path):
    fleet = tmp_path / "fleet_1m.csv"
    make_big_fleet(fleet)
    sandbox = Sandbox.start_subprocess(["--batch-rate", "200000"])
    try:
        env = {"VDS_BASE_URL": sandbox.url, "VDS_API_KEY": KEY}
        measured = run_measured([sys.executable, "-c", PIPELINE, str(fleet), str(tmp_path / "fleet.duckdb"),
                                 str(BATCH_SIZE)], env=env, timeout=840)
        sandbox_cpu = _cpu_seconds(sandbox.process.pid)
        submits = sandbox.count("/v1/recalls-batch/submit", key=KEY)
        accepted = sandbox.count("/v1/recalls-batch/submit", key=KEY, status=202)
        polls = sandbox.count("/v1/recalls-batch/status", key=KEY)
        results = sandbox.count("/v1/recalls-batch/results", key=KEY)
        units = sandbox.units(KEY)
    finally:
        sandbox.stop()
    assert measured.returncode == 0, measured.stderr[-3000:]
    figures = json.loads(measured.stdout.strip().splitlines()[-1])
    outcome, landed, ledger = figures["outcome"], figures["landed"], figures["ledger"]
    valid = figures["summary"]["valid"]
    batches = math.ceil(valid / BATCH_SIZE)
    print(f"\nrecall batches for a {ROWS:,}-row fleet ({valid:,} unique valid VINs, {batches} batches of "
          f"{BATCH_SIZE:,}; sandbox --batch-rate 200000, {sandbox_cpu:.0f} s of sandbox CPU): "
          f"process wall {measured.wall_s:.1f} s (ingest+roster {figures['ingest_s']:.1f} s, plan "
          f"{figures['plan_s']:.1f} s, batches {figures['batches_s']:.1f} s = "
          f"{landed['checks'] / max(figures['batches_s'], 1e-9):,.0f} VINs/s), peak RSS "
          f"{measured.peak_rss_mb:.0f} MB sampled, {figures['high_water_mb']:.0f} MB high-water; sandbox saw "
          f"{submits} submits ({accepted} accepted), {polls} status polls, {results} result fetches, "
          f"{units:,} units; landed {landed['checks']:,} recall checks")
    assert figures["roster"] == valid, "the roster did not land whole"
    assert figures["due"] == valid
    # Every batch submitted exactly once, each with its own idempotency key, each VIN paid once.
    assert outcome["submitted"] == accepted == submits == batches == ledger["batches"] == ledger["keys"]
    assert ledger["completed"] == batches and outcome["stop_reason"] is None
    assert units == valid
    assert landed["checks"] == landed["vins"] == outcome["checked"] == valid
