"""Memory short ends a command with one line and exit code 8 (tasks/exitcodes.py), not a traceback or a crash
signal: under an address-space limit too low to start (`prlimit --as`), and when an allocation is refused
while the fleet is read. A dry run of the sample fleet under a limit a few times its data still completes.

Before: the too-low limit failed in an import (a traceback, exit 1), and a MemoryError while reading was a
bug (exit 1, a traceback).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fleet_data.flows.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_fleet.csv"
MB = 1024 * 1024


def _dry_run_under(limit_mb: int, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "VDS_API_KEY": "memory_test_key", "PYTHONPATH": str(ROOT)}
    command = ["prlimit", f"--as={limit_mb * MB}", sys.executable, "-m", "fleet_data.flows.cli", "refresh",
               str(SAMPLE), "--dry-run", "--db", str(tmp_path / "fleet.duckdb"), "--lake", ""]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_limit_too_low_to_start_is_one_line_and_exit_8(tmp_path):
    ran = _dry_run_under(600, tmp_path)
    assert ran.returncode == 8, ran.stderr[-2000:]  # exitcodes.NO_MEMORY
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and "address-space limit" in lines[0] and "600 MB" in lines[0]
    assert not (tmp_path / "fleet.duckdb").exists()


def test_the_sample_fleets_dry_run_fits_under_a_limit_of_1200_mb(tmp_path):
    # The libraries' own reservations (malloc arenas, mimalloc's, thread stacks) made it map 2.8 GB for 240 MB.
    ran = _dry_run_under(1200, tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "recalls" in ran.stdout


def test_an_allocation_refused_while_reading_is_one_line_and_exit_8(tmp_path, monkeypatch, capsys):
    from fleet_data.tasks.ingest import fleet_files

    def refuse(*_args: object) -> None:
        raise MemoryError()  # what numpy, Arrow (ArrowMemoryError) and Python raise for a refused allocation

    monkeypatch.setattr(fleet_files, "_read_file", refuse)
    code = main(["refresh", str(SAMPLE), "--dry-run", "--db", str(tmp_path / "fleet.duckdb"), "--lake", "", "--json"])
    assert code == 8  # exitcodes.NO_MEMORY
    captured = capsys.readouterr()
    error = json.loads(captured.out)["error"]
    assert error["kind"] == "no_memory" and "while trying to read the fleet files" in error["message"]
    assert "Traceback" not in captured.err
