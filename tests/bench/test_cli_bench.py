"""Benchmark (not a timed test): how long `fleet --help` and a command's help take, the venv's `fleet` script as typed.

Run with `make bench` (or `pytest -m bench -s tests/bench/test_cli_bench.py`). Each command line runs RUNS times
in a fresh process (tests/bench/measure.py); prints the median and fastest wall time, the median CPU time (user
and system: what a busy machine does not inflate as it does the wall time) and the peak memory. The
target for `fleet --help` is under 0.7 s: it builds no command's parser (flows/cli/parser.py), so it imports
no model, polars, DuckDB, httpx or Prefect. Python's own start here, `python -c pass`, is printed beside it.
"""

from __future__ import annotations

import resource
import statistics
import sys
from pathlib import Path

import pytest

from tests.bench.measure import run_measured

pytestmark = [pytest.mark.bench, pytest.mark.timeout(1800)]  # 42 fresh processes on a busy machine
RUNS = 7
FLEET = str(Path(sys.executable).parent / "fleet")
LINES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "fleet --version": [FLEET, "--version"],
    "fleet --help": [FLEET, "--help"],
    "fleet refresh --help": [FLEET, "refresh", "--help"],
    "fleet status --help": [FLEET, "status", "--help"],
    "fleet completion bash": [FLEET, "completion", "bash"],
}


def _cpu_of_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def test_help_times():
    print(f"\n{'command':<24} {'median s':>9} {'fastest s':>10} {'CPU s':>6} {'peak MB':>8}  ({RUNS} runs each)")
    for name, command in LINES.items():
        runs, cpu = [], []
        for _ in range(RUNS):
            before = _cpu_of_children()
            runs.append(run_measured(command, timeout=300))
            cpu.append(_cpu_of_children() - before)
        assert all(r.returncode == 0 for r in runs), runs[0].stderr[-2000:]
        walls = [r.wall_s for r in runs]
        print(f"{name:<24} {statistics.median(walls):>9.2f} {min(walls):>10.2f} {statistics.median(cpu):>6.2f} "
              f"{max(r.peak_rss_mb for r in runs):>8.0f}", flush=True)
