"""The code stays lint- and type-clean: `ruff check .` and `mypy` pass, with the settings in pyproject.toml.

Both run from the repository root with the virtualenv's own executables, so `make test` checks exactly
what a developer runs by hand. mypy keeps its cache in `.mypy_cache` (gitignored): a second run only
re-checks what changed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv's bin/, not the resolved interpreter's


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    executable = BIN / tool
    assert executable.exists(), f"{executable} is missing: `make install` installs the dev dependencies"
    return subprocess.run([str(executable), *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_ruff_finds_nothing():
    result = _run("ruff", "check", ".", "--output-format", "concise")
    assert result.returncode == 0, f"ruff check . failed:\n{result.stdout}{result.stderr}"


@pytest.mark.timeout(900)  # a cold cache takes 30-60 s here, a warm one a few seconds
def test_mypy_finds_nothing():
    result = _run("mypy")  # the files and settings are pyproject.toml's [tool.mypy]
    assert result.returncode == 0, f"mypy failed:\n{result.stdout}{result.stderr}"
