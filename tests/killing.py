"""Kill -9 a command at a chosen moment: the kill tests' one way to do it (tests/flows/test_kill_ledger*.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_then_kill(command: list[str], env: Mapping[str, str], log: Path, ready: Callable[[], bool], *,
                  bound: float, poll: float = 0.01) -> None:
    """Start `command` (its output to `log`) and kill -9 it once `ready()`. Fails if it ends before, or does not
    get there within `bound` seconds (a hang guard for a loaded box, not a timing)."""
    with log.open("wb") as out:
        child = subprocess.Popen(command, cwd=ROOT, env=dict(env), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + bound
        while not ready():
            assert child.poll() is None, f"the refresh ended before the kill:\n{log.read_text(errors='replace')[-2000:]}"
            assert time.monotonic() < deadline, "the refresh never reached its calls"
            time.sleep(poll)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
