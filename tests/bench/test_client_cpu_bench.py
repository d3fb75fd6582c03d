"""Benchmark: CPU per call of the client, scheduler and journal, side by side with a bare aiohttp loop.

Issue 27's goal: per call, the HTTP client, the scheduler and the journal at or under 0.3 ms of CPU. One
sandbox process at 0 ms latency; each contender in its own process (`tests/bench/fetch_phase.py`), one
after the other in each round, several rounds, so a busy machine weighs on all of them alike. CPU per call
(user + system, over the fetch only) is the figure to compare; on a shared machine wall time is not.

Contenders: `staged` is ours as a fetch task runs it (client, scheduler, retry policy, the answer journal
written before each call, on uvloop); `ours` the same without the journal; `staged:asyncio:aiohttp` the
same work through aiohttp's client on asyncio's loop (the transport before); `bare` a bare aiohttp loop on
asyncio's loop (the issue's reference), `bare:uvloop` the same on uvloop (what uvloop alone gives aiohttp).
With `valgrind` installed and BENCH_INSTRUCTIONS=1, also the instructions each executes per call (user space,
callgrind): a count that does not move with the machine's load.

It prints figures and asserts only that every call was answered.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from fleet_data.connectors.sandbox import Sandbox
from tests.bench.compare.fleets import fleet_vins
from tests.bench.measure import ROOT

pytestmark = pytest.mark.bench

VINS = 6000
CONCURRENCY = 64
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
CONTENDERS = ("bare", "staged", "bare:uvloop", "ours", "staged:asyncio:aiohttp")


def _fetch(mode: str, url: str, vins_file: Path, calls: int) -> dict:
    done = subprocess.run([sys.executable, "-m", "tests.bench.fetch_phase", mode, url, str(vins_file), str(CONCURRENCY)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["ok"] == calls, out
    return out


def _instructions(mode: str, url: str, files: dict[int, Path]) -> float:
    """Instructions per call: the difference between two runs of different sizes, so fixed costs cancel."""
    counted = {}
    for calls, path in files.items():
        done = subprocess.run(["valgrind", "--tool=callgrind", "--cache-sim=no", "--callgrind-out-file=/dev/null",
                               sys.executable, "-m", "tests.bench.fetch_phase", mode, url, str(path), str(CONCURRENCY)],
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                              timeout=7200)
        found = re.search(r"Collected : (\d+)", done.stderr)
        assert done.returncode == 0 and found, done.stderr[-2000:]
        counted[calls] = int(found.group(1))
    (small, few), (large, many) = sorted(counted.items())
    return (many - few) / (large - small)


@pytest.mark.timeout(7200)
def test_cpu_per_call_of_client_scheduler_and_journal_against_a_bare_loop(tmp_path):
    vins = fleet_vins(VINS)
    vins_file = tmp_path / "vins.txt"
    vins_file.write_text("\n".join(vins))
    sandbox = Sandbox.start_subprocess()
    try:
        _fetch("bare", sandbox.url, vins_file, VINS)  # warms the sandbox's per-VIN answer cache for everyone
        cpu: dict[str, list[float]] = {mode: [] for mode in CONTENDERS}
        for round_ in range(ROUNDS):
            for mode in CONTENDERS:
                out = _fetch(mode, sandbox.url, vins_file, VINS)
                cpu[mode].append(out["cpu_ms_per_call"])
            print(f"\nround {round_ + 1}: " + ", ".join(f"{m} {cpu[m][-1]:.3f}" for m in CONTENDERS) + " ms CPU per call",
                  flush=True)
        print(f"\nCPU per call, specs for {VINS:,} VINs, {CONCURRENCY} in flight, sandbox at 0 ms, {ROUNDS} rounds "
              f"(median, min-max; load average {os.getloadavg()[0]:.1f} at the end):")
        for mode in CONTENDERS:
            ratio = [ours / bare for ours, bare in zip(cpu[mode], cpu["bare"])]
            print(f"  {mode:24s} {statistics.median(cpu[mode]):.3f} ms ({min(cpu[mode]):.3f}-{max(cpu[mode]):.3f}); "
                  f"÷ bare in the same round {statistics.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f})", flush=True)
        if os.environ.get("BENCH_INSTRUCTIONS") and shutil.which("valgrind"):
            files = {}
            for calls in (200, 1000):
                files[calls] = tmp_path / f"vins-{calls}.txt"
                files[calls].write_text("\n".join(vins[:calls]))
            for mode in ("bare", "staged", "staged:asyncio:aiohttp"):
                print(f"  {mode:24s} {_instructions(mode, sandbox.url, files) / 1000:.0f} k instructions per call "
                      "(user space)", flush=True)
    finally:
        sandbox.stop()
