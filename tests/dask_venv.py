"""A virtualenv holding only the fleet-data wheel built from this checkout and what pip resolves for it.

For the tests that run the installed package in other processes (tests/flows/test_dask_cluster.py). The
wheel is built from a copy of the sources (nothing is written into the checkout) with the setuptools
already installed; pip installs it into a fresh venv and resolves its dependencies from the wheel's own
metadata, pinned by requirements.lock (its hashes dropped: pip takes no hashes in a constraints file).

Resolving ~200 packages takes minutes on a loaded machine, so the venv is kept between runs under
~/.cache/fleet-data-tests, keyed by the dependencies (pyproject.toml's, the lock, the Python version); the
wheel itself is installed again on every use. The folder holds nothing else: no checkout on its path, no
PYTHONPATH. tests/wheel_venv.py (the packaging test's) may take this over.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "flows", "tasks", "connectors", "sql")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fleet-data-tests"


def _run(command: list[str], timeout: float = 600) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:5])}... failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def build_wheel(work: Path) -> Path:
    """The wheel of this checkout, built in `work` from a copy of its sources."""
    source = work / "source"
    source.mkdir(parents=True)
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, source / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
          "-w", str(work / "dist"), str(source)])
    (wheel,) = (work / "dist").glob("fleet_data-*.whl")
    return wheel


def _constraints(folder: Path) -> Path:
    """requirements.lock as pins only (a constraints file may not carry hashes)."""
    text = re.sub(r"\\\n\s*--hash=\S+", "", (ROOT / "requirements.lock").read_text())
    pins = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    path = folder / "constraints.txt"
    path.write_text("\n".join(pins) + "\n")
    return path


def _dependency_key() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    described = repr((project["dependencies"], (ROOT / "requirements.lock").read_text(), sys.version))
    return hashlib.sha256(described.encode()).hexdigest()[:16]


def wheel_venv(work: Path) -> Path:
    """The bin folder of a venv with this checkout's wheel and its dependencies (resolved by pip) installed."""
    wheel = build_wheel(work)
    CACHE.mkdir(parents=True, exist_ok=True)
    venv = CACHE / f"venv-{_dependency_key()}"
    python = venv / "bin" / "python"
    with (CACHE / f"{venv.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time (pytest-xdist)
        if not (venv / ".complete").exists():
            shutil.rmtree(venv, ignore_errors=True)
            _run([sys.executable, "-m", "venv", str(venv)])
            _run([str(python), "-m", "pip", "install", "--quiet", "--no-compile", "-c", str(_constraints(work)),
                  str(wheel)], timeout=900)
            (venv / ".complete").touch()
        else:  # the dependencies are as the lock says: only the wheel changes
            _run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", str(wheel)])
    return venv / "bin"
