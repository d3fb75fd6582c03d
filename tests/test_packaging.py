"""The wheel, installed in a fresh virtualenv, runs `fleet refresh` end to end from a folder outside the checkout.

Offline and in well under a minute: the wheel is built from a copy of the sources with the setuptools
already installed (no build isolation, nothing downloaded); the fresh venv has no pip and no system
site-packages, the wheel goes in with `--no-deps`, and only then does a `.pth` file lend it this
venv's dependencies (prefect, duckdb...). Nothing of the checkout is on its path: the SQL it runs
comes from the wheel. The sandbox it calls is `fleet sandbox` from that same install.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import duckdb
import polars as pl
import pytest

from tests.prefect_server import prefect_server

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "flows", "tasks", "connectors", "sql")
KEY = "packaging_test_key_3a9e"
pytestmark = pytest.mark.timeout(300)


def _run(command: list[str], *, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    assert done.returncode == 0, f"{' '.join(command[:4])}...:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed; its bin folder."""
    work = tmp_path_factory.mktemp("packaging")
    source = work / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, source / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
          "-w", str(work / "dist"), str(source)])
    (wheel,) = (work / "dist").glob("fleet_data-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    # One top-level folder; the SQL travels as package data.
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"fleet_data"}
    shipped = {n.removeprefix("fleet_data/") for n in names if n.endswith(".sql")}
    expected = {str(p.relative_to(ROOT)) for p in (ROOT / "sql").rglob("*.sql")}
    assert shipped == expected

    venv = work / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "--quiet",
          str(wheel)])
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    assert not any((site / name).exists() for name in ("tasks", "flows", "connectors", "sql"))
    # Only now, the dependencies: this venv's site-packages, after the new one's own.
    (site / "zz_fleet_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


@contextlib.contextmanager
def _sandbox(fleet: Path, cwd: Path, env: dict[str, str]) -> Iterator[str]:
    process = subprocess.Popen([str(fleet), "sandbox", "--port", "0"], cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(30)
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


@pytest.fixture(scope="module")
def server() -> Iterator[dict[str, str]]:
    with prefect_server() as env:
        yield env


def test_the_installed_wheel_refreshes_a_fleet_from_any_folder(installed, server, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    rows = pl.read_csv(ROOT / "data" / "sample_fleet.csv", infer_schema=False).head(5)
    rows.write_csv(elsewhere / "small.csv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VDS_", "PREFECT_", "PYTHONPATH"))}
    env |= server  # the installed refresh reports to a Prefect server, as a deployed one would

    # The code that runs is the wheel's, and nothing named `tasks` was installed beside it.
    probe = "import fleet_data.tasks.store.database as s; print(s.SQL_DIR)"
    where = _run([str(installed / "python"), "-c", probe], cwd=elsewhere, env=env).stdout.strip()
    assert Path(where).is_relative_to(installed.parent) and (Path(where) / "migrations").is_dir()
    alone = subprocess.run([str(installed / "python"), "-c", "import tasks"], cwd=elsewhere, env=env, check=False,
                           capture_output=True, text=True, timeout=60)
    assert alone.returncode != 0 and "No module named 'tasks'" in alone.stderr

    fleet = installed / "fleet"
    with _sandbox(fleet, elsewhere, env) as url:
        done = _run([str(fleet), "refresh", "small.csv", "--datasets", "specs", "--lake", "", "--json"],
                    cwd=elsewhere, env={**env, "VDS_BASE_URL": url, "VDS_API_KEY": KEY}, timeout=240)
    summary = json.loads(done.stdout)
    assert summary["status"] == "completed"
    with duckdb.connect(str(elsewhere / "data" / "fleet.duckdb"), read_only=True) as con:
        run = con.execute("SELECT status FROM runs WHERE run_id = $r", {"r": summary["run_id"]}).fetchall()
        (vehicles,) = con.execute("SELECT count(*) FROM vehicles WHERE run_id = $r", {"r": summary["run_id"]}).fetchone()
        (specs,) = con.execute("SELECT count(*) FROM specs WHERE run_id = $r", {"r": summary["run_id"]}).fetchone()
        # The data dictionary ships in the wheel (sql/dictionary/*.toml): every column is described.
        (undescribed,) = con.execute("SELECT count(*) FILTER (WHERE comment IS NULL) FROM duckdb_columns() "
                                     "WHERE database_name = current_database() AND schema_name = 'main'").fetchone()
    assert run == [("completed",)] and vehicles >= 3 and specs == vehicles == summary["ingest"]["valid"]
    assert undescribed == 0
