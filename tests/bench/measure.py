"""Run one contender in its own process and measure it the same way for everyone.

Wall time from start to exit; peak memory as the highest sum of RSS over the process and its
children, sampled every 20 ms with psutil (ru_maxrss would miss children and cannot be reset).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Measured:
    wall_s: float
    peak_rss_mb: float
    returncode: int
    stdout: str
    stderr: str


def _tree_rss(process: psutil.Process) -> int:
    total = 0
    try:
        members = [process, *process.children(recursive=True)]
    except psutil.Error:
        return 0
    for member in members:
        try:
            total += member.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_measured(command: list[str], *, env: dict[str, str] | None = None, timeout: float = 3600,
                 cwd: Path = ROOT) -> Measured:
    """`command` run to completion; raises on timeout (the process tree is killed first)."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    watched = psutil.Process(process.pid)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(watched))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for child in watched.children(recursive=True):
            child.kill()
        process.kill()
        process.communicate()
        raise
    finally:
        done.set()
        sampler.join()
    return Measured(time.perf_counter() - started, peak / 2**20, process.returncode, stdout, stderr)


def refresh_cli(fleet: Path, db: Path, env: dict[str, str], timeout: float = 1800) -> tuple[float, dict]:
    """`fleet refresh FLEET --db DB --json` in its own process: (wall seconds, the JSON summary)."""
    command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fleet), "--db", str(db), "--lake", "", "--json"]
    done = run_measured(command, env=env, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.wall_s, json.loads(done.stdout)
