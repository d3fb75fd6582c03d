"""The wheel, built from the checkout and installed in a fresh virtualenv the way a user installs it.

`pip install fleet_data-*.whl` into a new venv, pip resolving the wheel's declared dependencies (from its
cache or the registry): nothing is lent by the venv the tests run in (no `.pth` file, no system
site-packages), so an import the wheel does not declare fails there as it would for a user. The versions
are the runtime lock's (`-c requirements.lock`), the ones `make demo` installs; with extras, the dev lock
pins what they add.

Built once per test session (per pytest-xdist worker): `wheel_venv(work, extras)` returns the same bin
folder on every later call with the same extras. Used by tests/test_packaging.py; a test that needs the
installed package in other processes (a Dask worker, a Prefect worker) asks for the same venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "flows", "tasks", "connectors", "sql")
RUNTIME_LOCK = ROOT / "requirements.lock"
DEV_LOCK = ROOT / "requirements-dev.lock"
INSTALL_TIMEOUT_SECONDS = 1200  # ~140 packages, from pip's cache or the registry, on 2 busy cores

_wheels: dict[str, Path] = {}
_venvs: dict[tuple[str, ...], Path] = {}


def run(command: list[str], *, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """Run `command`; fail with the end of its output unless it exits 0."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, command[:5]))}...:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def clean_env() -> dict[str, str]:
    """This environment without what would point a child Python at the checkout or at this venv."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def build_wheel(work: Path) -> Path:
    """The project's wheel, built from a copy of the sources (once per session)."""
    if "wheel" not in _wheels:
        source = work / "source"
        source.mkdir(parents=True)
        for name in SOURCES:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(ROOT / name, source / name)
        # The build backend (setuptools) is this venv's: no build isolation, nothing downloaded to build.
        run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
             "-w", str(work / "dist"), str(source)], timeout=300)
        (_wheels["wheel"],) = (work / "dist").glob("fleet_data-*.whl")
    return _wheels["wheel"]


def _constraints(path: Path, locks: list[Path]) -> Path:
    """The locks' pins without their hashes: a hashed constraint would put pip in hash-checking mode, which the
    wheel just built (no hash anywhere) cannot pass."""
    pins = [line.split()[0] for lock in locks for line in lock.read_text().splitlines() if "==" in line.split(" ")[0]]
    path.write_text("\n".join(pins) + "\n")
    return path


def wheel_venv(work: Path, extras: Iterable[str] = ()) -> Path:
    """A fresh venv with the wheel (and `extras`) installed, dependencies resolved by pip; its bin folder."""
    key = tuple(sorted(extras))
    if key not in _venvs:
        work.mkdir(parents=True, exist_ok=True)
        wheel = build_wheel(work)
        venv = work / ("venv-" + "-".join(key) if key else "venv")
        # From the base interpreter: a venv made from a venv's Python would still be a fresh one, but say so.
        base = getattr(sys, "_base_executable", sys.executable)
        run([base, "-m", "venv", str(venv)], env=clean_env(), timeout=300)
        constraints = _constraints(work / f"{venv.name}-constraints.txt", [RUNTIME_LOCK, DEV_LOCK] if key else [RUNTIME_LOCK])
        target = f"{wheel}[{','.join(key)}]" if key else str(wheel)
        run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-c", str(constraints), target],
            env=clean_env(), timeout=INSTALL_TIMEOUT_SECONDS)
        _venvs[key] = venv / "bin"
    return _venvs[key]
