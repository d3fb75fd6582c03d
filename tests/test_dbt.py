"""dbt (dbt-core 1.11, dbt-duckdb 1.11) builds a model over the generated sources: the published database and the lake.

dbt lives in a virtualenv of its own, built once per test session in a temporary folder: dbt-core 1.11 pins
pathspec<0.13, which the project's mypy does not accept, so it cannot join the dev dependencies. Its duckdb
is pinned to ours (the same file format). The build runs `dbt/` as a user would, with the published file
attached read-only, and the descriptions the manifest holds are the dictionary's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import polars as pl
import pytest

from fleet_data.tasks.store import dictionary
from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.store.published import publish_file as publish

ROOT = Path(__file__).resolve().parents[1]
VINS = ["1HGCM82633A004352", "WBA3A5C56G0915102"]
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="session")
def dbt(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("dbt-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "dbt-core>=1.11,<1.12",
         "dbt-duckdb>=1.11,<1.12", f"duckdb=={duckdb.__version__}"],
        capture_output=True, text=True, timeout=480, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv / "bin" / "dbt"


@pytest.fixture
def fleet(tmp_path) -> Path:
    """data/fleet.duckdb published and data/lake exported: two vehicles, one valued in two months."""
    db = tmp_path / "data" / "fleet.duckdb"
    with open_database(db) as store:
        store.start_run("refresh", ["fleet.csv"], {}, run_id="r1")
        store.land("vehicles", pl.DataFrame({"vin": VINS, "unit_number": ["U-1", "U-2"]}), "r1")
        store.land("market_values", pl.DataFrame({
            "vin": [VINS[0]] * 2, "valued_on": [date(2026, 1, 5), date(2026, 2, 5)], "retail": [9000.0, 8500.5],
            "fetched_at": [datetime(2026, 1, 5, tzinfo=timezone.utc), datetime(2026, 2, 5, tzinfo=timezone.utc)],
        }), "r1")
        store.export_parquet(tmp_path / "data" / "lake")
    publish(db)
    return tmp_path / "data"


def test_dbt_builds_a_model_over_the_published_database_and_the_lake(dbt, fleet, tmp_path):
    env = {**os.environ, "FLEET_DB": str(fleet / "fleet.duckdb"), "FLEET_LAKE": str(fleet / "lake"),
           "FLEET_DBT_DB": str(tmp_path / "analytics.duckdb"), "HOME": str(tmp_path), "DO_NOT_TRACK": "1",
           "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    done = subprocess.run(
        [str(dbt), "build", "--project-dir", str(ROOT / "dbt"), "--profiles-dir", str(ROOT / "dbt"),
         "--target-path", str(tmp_path / "target"), "--log-path", str(tmp_path / "logs")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "PASS=3" in done.stdout  # the model and its two tests

    with duckdb.connect(str(tmp_path / "analytics.duckdb"), read_only=True) as con:
        rows = con.sql("SELECT vin, latest_retail, valuations, months_valued, latest_valued_month "
                       "FROM vehicle_valuations ORDER BY vin").fetchall()
    assert rows == [(VINS[0], Decimal("8500.50"), 2, 2, date(2026, 2, 1)), (VINS[1], None, 0, 0, None)]

    # The sources carry the dictionary's descriptions into dbt (docs, lineage).
    manifest = json.loads((tmp_path / "target" / "manifest.json").read_text(encoding="utf-8"))
    overview = manifest["sources"]["source.fleet_analytics.fleet.vehicle_overview"]
    entries = dictionary.load()
    assert overview["description"] == entries["vehicle_overview"].description
    assert overview["columns"]["park_now"]["description"] == entries["vehicle_overview"].columns["park_now"]
    lake = manifest["sources"]["source.fleet_analytics.fleet_lake.market_values"]
    assert lake["columns"]["valued_month"]["description"] == entries["_lake"].columns["valued_month"]
    assert "source.fleet_analytics.fleet_lake.ownership_records" not in manifest["sources"]  # personal data

    said: list[str] = []
    assert publish(fleet / "fleet.duckdb", say=said.append) is not None and said == []  # dbt wrote nothing there


def documented_commands() -> list[str]:
    """The `dbt build` lines of dbt/README.md, as a user types them (comments dropped)."""
    text = (ROOT / "dbt" / "README.md").read_text(encoding="utf-8")
    lines = [line.split("#")[0].strip() for line in text.split("```sh", 1)[1].split("```", 1)[0].splitlines()]
    return [line for line in lines if "dbt build" in line]


def test_the_documented_commands_work_from_the_root_and_from_dbt_and_write_a_file_older_duckdb_reads(dbt, fleet, tmp_path):
    """issue 30: `cd dbt && dbt build --profiles-dir .` could not open dbt/data/analytics.duckdb (the profile's
    paths were the current folder's), dbt/logs and dbt/target were not ignored, and the DuckDB CLI 1.5 could not
    open what dbt wrote. A copy of dbt/ beside the published data/, run without any FLEET_* variable."""
    import shutil

    from tests.sql.test_older_duckdb import _venv

    repo = fleet.parent  # holds data/: fleet.duckdb and lake/
    shutil.copytree(ROOT / "dbt", repo / "dbt", ignore=shutil.ignore_patterns("logs", "target"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    env.update(HOME=str(tmp_path), DO_NOT_TRACK="1", DBT_SEND_ANONYMOUS_USAGE_STATS="false", PATH=f"{dbt.parent}:{env['PATH']}")
    commands = documented_commands()
    assert len(commands) == 2 and any(c.startswith("cd dbt") for c in commands)
    cli = _venv("cli", "duckdb-cli") / "bin" / "duckdb"
    lts = _venv("lts", "duckdb==1.4.*") / "bin" / "python"
    for command in commands:
        (repo / "data" / "analytics.duckdb").unlink(missing_ok=True)
        done = subprocess.run(["bash", "-c", command], cwd=repo, env=env, capture_output=True, text=True, timeout=300,
                              check=False)
        assert done.returncode == 0 and "PASS=3" in done.stdout, command + done.stdout[-3000:] + done.stderr[-2000:]
        read = subprocess.run([str(cli), "-readonly", "-csv", "-noheader", str(repo / "data" / "analytics.duckdb"), "-c",
                               "SELECT count(*), sum(valuations) FROM vehicle_valuations"],
                              capture_output=True, text=True, timeout=120, check=False)
        assert (read.returncode, read.stdout.strip()) == (0, "2,2"), command + read.stderr
        older = subprocess.run([str(lts), "-c", "import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True); "
                                "print(con.sql('SELECT count(*) FROM vehicle_valuations').fetchone()[0])",
                                str(repo / "data" / "analytics.duckdb")], capture_output=True, text=True, timeout=120)
        assert older.stdout.strip() == "2", command + older.stderr
    assert {p.name for p in (repo / "dbt").iterdir()} >= {"logs", "target"}  # what git must ignore in the checkout
    ignored = subprocess.run(["git", "check-ignore", "dbt/logs/dbt.log", "dbt/target/manifest.json"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60, check=False)
    assert ignored.stdout.split() == ["dbt/logs/dbt.log", "dbt/target/manifest.json"]
