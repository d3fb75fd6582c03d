"""The wheel, installed in a fresh virtualenv as a user installs it, runs `fleet refresh` from a folder outside
the checkout.

The venv (tests/wheel_venv.py) gets the wheel with `pip install`, pip resolving the dependencies the wheel
declares, pinned to the runtime lock: nothing is lent by the venv the tests run in, so an import the shipped
code does not declare (numpy, once) fails here as it did for a user. Nothing of the checkout is on its path:
the SQL it runs comes from the wheel. The sandbox it calls is `fleet sandbox` from that same install.
"""

from __future__ import annotations

import json
import subprocess
import sysconfig
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import duckdb
import polars as pl
import pytest

from tests.prefect_server import prefect_server
from tests.wheel_venv import INSTALL_TIMEOUT_SECONDS, build_wheel, clean_env, installed_sandbox, run, session_work_dir, wheel_venv

ROOT = Path(__file__).resolve().parents[1]
KEY = "packaging_test_key_3a9e"
# Building the venv (resolving and installing ~140 packages) is most of it; the refresh itself takes a minute.
pytestmark = pytest.mark.timeout(INSTALL_TIMEOUT_SECONDS + 600)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed; its bin folder."""
    work = session_work_dir(tmp_path_factory)
    wheel = build_wheel(work)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    # One top-level folder, a regular package with its types (not a namespace package); the SQL travels as package data.
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"fleet_data"}
    assert {"fleet_data/__init__.py", "fleet_data/py.typed"} <= set(names)
    shipped = {n.removeprefix("fleet_data/") for n in names if n.endswith(".sql")}
    expected = {str(p.relative_to(ROOT)) for p in (ROOT / "sql").rglob("*.sql")}
    assert shipped == expected
    # What `pip show` and an index show: the license (and its text), the URLs, the systems and Python it runs on.
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    fields = [line.split(": ", 1) for line in metadata.split("\n\n", 1)[0].splitlines() if ": " in line]
    assert ["License-Expression", "Apache-2.0"] in fields and ["Requires-Python", ">=3.11"] in fields
    classifiers = {value for key, value in fields if key == "Classifier"}
    assert {"Operating System :: POSIX :: Linux", "Operating System :: MacOS", "Typing :: Typed"} <= classifiers
    assert {value.split(",")[0] for key, value in fields if key == "Project-URL"} >= {"Homepage", "Source", "Changelog"}
    assert [key for key, _ in fields].count("Author") == 1

    bin_dir = wheel_venv(work)
    python = bin_dir / "python"
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    assert not any((site / name).exists() for name in ("tasks", "flows", "connectors", "sql"))
    # Nothing borrowed: the new venv's path holds neither this venv's packages nor the checkout.
    path = json.loads(run([str(python), "-c", "import json, sys; print(json.dumps(sys.path))"], cwd=bin_dir,
                          env=clean_env()).stdout)
    ours = sysconfig.get_paths()["purelib"]
    assert not [p for p in path if p and (Path(p) == Path(ours) or Path(p).resolve() == ROOT)], path
    return bin_dir


@pytest.fixture(scope="module")
def server() -> Iterator[dict[str, str]]:
    with prefect_server() as env:
        yield env


def test_the_installed_wheel_refreshes_a_fleet_from_any_folder(installed, server, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    rows = pl.read_csv(ROOT / "data" / "sample_fleet.csv", infer_schema=False).head(5)
    rows.write_csv(elsewhere / "small.csv")
    env = {k: v for k, v in clean_env().items() if not k.startswith(("VDS_", "PREFECT_"))}
    env |= server  # the installed refresh reports to a Prefect server, as a deployed one would

    fleet = installed / "fleet"
    # What failed for a user: the command, before any refresh, imports the whole CLI.
    version = run([str(fleet), "--version"], cwd=elsewhere, env=env).stdout
    assert version.split() == ["fleet", tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]]

    # The code that runs is the wheel's, and nothing named `tasks` was installed beside it.
    probe = "import fleet_data.tasks.store.database as s; print(s.SQL_DIR)"
    where = run([str(installed / "python"), "-c", probe], cwd=elsewhere, env=env).stdout.strip()
    assert Path(where).is_relative_to(installed.parent) and (Path(where) / "migrations").is_dir()
    alone = subprocess.run([str(installed / "python"), "-c", "import tasks"], cwd=elsewhere, env=env, check=False,
                           capture_output=True, text=True, timeout=60)
    assert alone.returncode != 0 and "No module named 'tasks'" in alone.stderr

    with installed_sandbox(fleet, elsewhere, env) as url:
        done = run([str(fleet), "refresh", "small.csv", "--datasets", "specs", "--lake", "", "--json"],
                   cwd=elsewhere, env={**env, "VDS_BASE_URL": url, "VDS_API_KEY": KEY}, timeout=240)
    summary = json.loads(done.stdout)
    assert summary["status"] == "completed"
    with duckdb.connect(str(elsewhere / "data" / "fleet.duckdb"), read_only=True) as con:
        statuses = con.execute("SELECT status FROM runs WHERE run_id = $r", {"r": summary["run_id"]}).fetchall()
        (vehicles,) = con.execute("SELECT count(*) FROM vehicles WHERE run_id = $r", {"r": summary["run_id"]}).fetchone()
        (specs,) = con.execute("SELECT count(*) FROM specs WHERE run_id = $r", {"r": summary["run_id"]}).fetchone()
        # The data dictionary ships in the wheel (sql/dictionary/*.toml): every column is described.
        (undescribed,) = con.execute("SELECT count(*) FILTER (WHERE comment IS NULL) FROM duckdb_columns() "
                                     "WHERE database_name = current_database() AND schema_name = 'main'").fetchone()
    assert statuses == [("completed",)] and vehicles >= 3 and specs == vehicles == summary["ingest"]["valid"]
    assert undescribed == 0


EXTRAS = {"dask": ("prefect_dask", "distributed", "dask"), "s3": ("s3fs", "botocore")}


def test_the_base_install_has_no_extra_and_refuses_what_needs_one_naming_it(installed, tmp_path):
    """`pip install fleet-data` brings neither Dask nor S3; `--dask` and `--staging s3://` then say which extra to add."""
    probe = ("import importlib.util, json; print(json.dumps([m for m in %r if importlib.util.find_spec(m)]))"
             % [m for modules in EXTRAS.values() for m in modules])
    assert json.loads(run([str(installed / "python"), "-c", probe], cwd=tmp_path, env=clean_env()).stdout) == []
    fleet_file = tmp_path / "small.csv"
    pl.read_csv(ROOT / "data" / "sample_fleet.csv", infer_schema=False).head(3).write_csv(fleet_file)
    for option, extra in ((["--dask", "tcp://127.0.0.1:8786"], "dask"), (["--staging", "s3://fleet-bucket/runs"], "s3")):
        done = subprocess.run([str(installed / "fleet"), "refresh", str(fleet_file), "--db", str(tmp_path / "f.duckdb"),
                               *option], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and f"pip install 'fleet-data[{extra}]'" in done.stderr
    assert not (tmp_path / "f.duckdb").exists()
