"""The memory each step of a refresh needs: the flow's process sampled every 50 ms, each sample counted in the phase
its progress file names (docs/scale.md, "Memory per step"; issue 28).

    python -m tests.bench.step_memory 1000 100000 --dry-run 1000000

For each size, a fleet from the ingest bench's generator, a fresh database, `fleet refresh --datasets specs` against
the sandbox in its own process at 0 ms (`--dry-run` sizes: `fleet refresh --dry-run`, ingest and plan only). Prints
the peak RSS of the flow's process per phase (its Prefect server and the sandbox are other processes, not counted),
and for a refresh the rate answers landed at in each fifth of them (the progress file's count, sampled with the
memory): a landing that slows as the store grows shows as a last fifth slower than the second.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import psutil

from fleet_data.connectors.sandbox import Sandbox
from tests.bench.test_ingest_bench import make_big_fleet

ROOT = Path(__file__).resolve().parents[2]


def by_fifth(landed: list[tuple[float, int]]) -> list[float]:
    """Answers per second in each fifth of the answers, from (seconds, answers landed) samples."""
    total = landed[-1][1] if landed else 0
    if total < 5:
        return []
    crossed = [next(t for t, n in landed if n >= total * k / 5) for k in range(1, 6)]
    starts = [next(t for t, n in landed if n > 0), *crossed[:-1]]
    return [total / 5 / max(end - start, 1e-3) for start, end in zip(starts, crossed)]


def measure(rows: int, dry_run: bool, sandbox: Sandbox, folder: Path) -> tuple[dict[str, float], float, list[float]]:
    fleet, db = folder / f"fleet-{rows}.csv", folder / f"fleet-{rows}-{int(dry_run)}.duckdb"
    if not fleet.exists():
        make_big_fleet(fleet, rows, 7)
    env = {**os.environ, "VDS_BASE_URL": sandbox.url, "VDS_API_KEY": "step_memory", "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fleet), "--db", str(db), "--lake", "",
               "--datasets", "specs", *(["--dry-run"] if dry_run else [])]
    started = time.monotonic()
    log = Path(tempfile.gettempdir()) / f"step_memory-{rows}{'-dry-run' if dry_run else ''}.log"  # kept: what it said
    with log.open("wb") as out:
        child = subprocess.Popen(command, cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT)
    watched, progress = psutil.Process(child.pid), Path(f"{db}.progress.json")
    peaks: dict[str, float] = defaultdict(float)
    phase = "starting"
    landed: list[tuple[float, int]] = []
    while child.poll() is None:
        try:
            state = json.loads(progress.read_text())
            phase = state.get("phase", phase)
            landed.append((time.monotonic(), sum(d["done"] for d in state.get("datasets", {}).values()
                                                 if d["description"].startswith("Fetching"))))  # not ingest, plates
        except (OSError, ValueError, KeyError, TypeError):
            pass
        try:
            peaks[phase] = max(peaks[phase], watched.memory_info().rss / 2**20)
        except psutil.Error:
            break
        time.sleep(0.05)
    # 3: partial. A fleet this size holds VINs the sandbox fails on purpose (its fault-trigger serials), so some end
    # failed; the run is still whole. Anything else is a failure of the command: its log says why.
    assert child.wait() in (0, 3), f"{command} exited {child.returncode}; see {log}"
    return dict(peaks), time.monotonic() - started, by_fifth(landed)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("rows", type=int, nargs="*", default=[1_000, 100_000])
    parser.add_argument("--dry-run", type=int, nargs="*", default=[1_000_000], dest="dry")
    args = parser.parse_args()
    sandbox = Sandbox.start_subprocess(["--latency-ms", "0"])
    try:
        with tempfile.TemporaryDirectory() as scratch:
            for rows, dry in [*((r, False) for r in args.rows), *((r, True) for r in args.dry)]:
                peaks, wall, rates = measure(rows, dry, sandbox, Path(scratch))
                steps = ", ".join(f"{phase} {mib:.0f}" for phase, mib in peaks.items())
                print(f"{rows:>9,} rows{' (dry run)' if dry else ''}: {wall:.0f} s; peak MiB per phase: {steps}",
                      flush=True)
                if rates:
                    print(f"{'':>15}answers landed per second by fifth: {', '.join(f'{r:,.0f}' for r in rates)}; "
                          f"last fifth / second fifth {rates[4] / rates[1]:.2f}", flush=True)
    finally:
        sandbox.stop()


if __name__ == "__main__":
    main()
