"""The wheel, built from the checkout and installed in a fresh virtualenv the way a user installs it.

`pip install fleet_data-*.whl` into a new venv, pip resolving the wheel's declared dependencies (from its
cache or the registry): nothing is lent by the venv the tests run in (no `.pth` file, no system
site-packages), so an import the wheel does not declare fails there as it would for a user. The versions
are the runtime lock's (`-c requirements.lock`), the ones `make demo` installs; with extras, the dev lock
pins what they add.

Built once per test run: `wheel_venv(work, extras)` returns the same bin folder on every later call with
the same extras, and with `work = session_work_dir(tmp_path_factory)` the pytest-xdist workers share one
build (the first builds it under a file lock, the others wait and reuse it). Used by
tests/test_packaging.py; a test that needs the installed package in processes of its own (a Dask worker, a
Prefect worker) asks for the same venv.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "src", "flows", "tasks", "connectors", "sql")
RUNTIME_LOCK = ROOT / "requirements.lock"
DEV_LOCK = ROOT / "requirements-dev.lock"
INSTALL_TIMEOUT_SECONDS = 1200  # ~140 packages, from pip's cache or the registry, on 2 busy cores

_venvs: dict[tuple[str, ...], Path] = {}


def run(command: list[str], *, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """Run `command`; fail with the end of its output unless it exits 0."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, command[:5]))}...:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def clean_env() -> dict[str, str]:
    """This environment without what would point a child Python at the checkout or at this venv."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def session_work_dir(tmp_path_factory) -> Path:
    """A folder for this test run, the same for every pytest-xdist worker (their base folders' parent)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "wheel-venv"


def _locked_once(work: Path, name: str, build) -> None:
    """`build()` unless another process (or an earlier call) finished it: `work/name.done` says so."""
    work.mkdir(parents=True, exist_ok=True)
    with open(work / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        if not (work / f"{name}.done").exists():
            build()
            (work / f"{name}.done").touch()


def build_wheel(work: Path) -> Path:
    """The project's wheel, built from a copy of the sources (once per test run)."""
    def build() -> None:
        source = work / "source"
        shutil.rmtree(source, ignore_errors=True)  # a build that died half way
        for name in SOURCES:
            if (ROOT / name).is_dir():  # src/fleet_data's links stay links, to the copied folders beside them
                shutil.copytree(ROOT / name, source / name, symlinks=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                source.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, source / name)
        # The build backend (setuptools) is this venv's: no build isolation, nothing downloaded to build.
        run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
             "-w", str(work / "dist"), str(source)], timeout=300)

    _locked_once(work, "wheel", build)
    (wheel,) = (work / "dist").glob("fleet_data-*.whl")
    return wheel


def _constraints(path: Path, locks: list[Path]) -> Path:
    """The locks' pins without their hashes: a hashed constraint would put pip in hash-checking mode, which the
    wheel just built (no hash anywhere) cannot pass."""
    pins = [line.split()[0] for lock in locks for line in lock.read_text().splitlines() if "==" in line.split(" ")[0]]
    path.write_text("\n".join(pins) + "\n")
    return path


def wheel_venv(work: Path, extras: Iterable[str] = ()) -> Path:
    """A fresh venv with the wheel (and `extras`) installed, dependencies resolved by pip; its bin folder.

    With extras, the venv is layered on the base one (built first, as `wheel_venv(work)` builds it): a `.pth`
    file puts the base venv's packages on its path, and pip installs only what the extras add, and the wheel
    again so that its `fleet` script is this venv's. The base venv stays as a user without extras has it.
    """
    key = tuple(sorted(extras))
    if key in _venvs:
        return _venvs[key]
    wheel = build_wheel(work)
    base = wheel_venv(work) if key else None
    venv = work / ("venv-" + "-".join(key) if key else "venv")

    def build() -> None:
        shutil.rmtree(venv, ignore_errors=True)  # a build that died half way
        # From the base interpreter, with pip: the venv a user makes with `python3 -m venv`.
        interpreter = getattr(sys, "_base_executable", sys.executable)
        run([interpreter, "-m", "venv", str(venv)], env=clean_env(), timeout=300)
        python = str(venv / "bin" / "python")
        if base is not None:
            site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env=clean_env())
            below = run([str(base / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        env=clean_env())
            (Path(site.stdout.strip()) / "base-venv.pth").write_text(below.stdout.strip() + "\n")
        constraints = _constraints(work / f"{venv.name}-constraints.txt", [RUNTIME_LOCK, DEV_LOCK] if key else [RUNTIME_LOCK])
        target = f"{wheel}[{','.join(key)}]" if key else str(wheel)
        # --no-compile: Python compiles what the tests import as they import it, not all of Prefect up front.
        run([python, "-m", "pip", "install", "--quiet", "--no-compile", "-c", str(constraints), target],
            env=clean_env(), timeout=INSTALL_TIMEOUT_SECONDS)
        if base is not None:  # the wheel itself in this venv, with its script (pip found it in the base venv)
            run([python, "-m", "pip", "install", "--quiet", "--no-compile", "--no-deps", "--force-reinstall", str(wheel)],
                env=clean_env(), timeout=300)

    _locked_once(work, venv.name, build)
    _venvs[key] = venv / "bin"
    return _venvs[key]


@contextlib.contextmanager
def installed_sandbox(fleet: Path, cwd: Path, env: dict[str, str], *options: str) -> Iterator[str]:
    """`fleet sandbox` of an installed wheel on a free loopback port, in a session of its own; its URL. Stopped
    (its group, by the process id) on exit."""
    process = subprocess.Popen([str(fleet), "sandbox", "--port", "0", *options], cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(60)
        assert first and first[0].startswith("SANDBOX_URL="), f"fleet sandbox did not start: {first}"
        yield first[0].strip().split("=", 1)[1]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
