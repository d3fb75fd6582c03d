"""What needs no service and no flow answers without Prefect: a dry run, a backfill or re-parse with nothing
to do. Each runs `fleet` in a fresh interpreter with PREFECT_API_URL and the service pointed at a closed
port: it must succeed there, and `prefect` must never have been imported (so no server could start).

A dry run writes nothing: the database files beside `--db` (published file, working store, lock, progress
file, staging) are byte for byte what they were, or still absent.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.ingest.fleet_files import read_fleet
from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.store.published import publish_file as publish

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_fleet.csv"
CLOSED = "http://127.0.0.1:9"  # discard port: nothing listens there
# Runs `fleet` and then says, on its last stderr line, which Prefect modules the command imported.
SCRIPT = """
import json, sys
from fleet_data.flows.cli import main
code = main(sys.argv[1:])
print("MODULES " + json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == '{top}')), file=sys.stderr)
sys.exit(code)
"""


def fleet(*argv: str, top: str = "prefect") -> tuple[int, str, str, list[str]]:
    """`fleet argv...` in a new interpreter that cannot reach Prefect or the service: (code, out, err, the modules of
    package `top` it imported)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VDS_", "PREFECT_API"))}
    env |= {"PREFECT_API_URL": f"{CLOSED}/api", "VDS_BASE_URL": CLOSED, "VDS_API_KEY": "fast_path_key",
            "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SCRIPT.replace("{top}", top), *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    err, _, modules = done.stderr.rpartition("MODULES ")
    return done.returncode, done.stdout, err, json.loads(modules) if modules else ["(no report: it crashed)"]


def files_of(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under `folder`: its content hash and modification time."""
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def build_database(path: Path, *, fresh_specs: int, failures: bool = False) -> list[str]:
    """A database as a refresh leaves it, built without Prefect: the sample roster, `fresh_specs` VINs with
    a specs answer from now; published, with its working store beside it. Returns the roster's VINs."""
    roster = read_fleet([str(SAMPLE)]).roster
    now = datetime.now(UTC)
    with open_database(str(path)) as db:
        db.start_run("refresh", [str(SAMPLE)], run_id="run-1")
        db.land_chunk({"vehicles": roster}, "run-1")
        vins = sorted(db.query("roster_vins")["vin"].to_list())
        answered = pl.DataFrame([{"vin": v, "dataset": "specs", "outcome": "found", "fetched_at": now}
                                 for v in vins[:fresh_specs]],
                                schema={"vin": pl.String, "dataset": pl.String, "outcome": pl.String,
                                        "fetched_at": staging.TS})
        db.land("fetch_status", answered, "run-1")
        if failures:
            db.land("failures", staging.failures_frame([
                {"vin": vins[0], "dataset": "history", "status": 502, "message": "Could not fetch data",
                 "retryable": True, "attempts": 5, "fetched_at": now}]), "run-1")
        db.finish_run("run-1", "completed", counts={"rows_in": roster.height, "valid": roster.height})
    publish(str(path))
    return vins


def test_dry_run_of_a_new_database_plans_everything_and_creates_nothing(tmp_path):
    db = tmp_path / "data" / "fleet.duckdb"
    code, out, err, prefect = fleet("refresh", str(SAMPLE), "--db", str(db), "--dry-run", "--json")
    assert code == 0, err
    assert prefect == []  # Prefect never imported: no server could have started
    assert not (tmp_path / "data").exists()  # not even the folder
    summary = json.loads(out)
    ingest = summary["ingest"]
    assert summary["status"] == "planned" and summary["calls"] == 0
    assert all(d["planned"] + d["not_applicable"] == d["roster"] == ingest["valid"] for d in summary["datasets"].values())
    # Rows waiting for a plate lookup would be looked up (13 rows, 12 distinct plates): they are not rejected.
    assert (ingest["plates_waiting"], summary["plates"]["lookups"], summary["plates"]["not_looked_up"]) == (13, 12, 0)
    assert ingest["rows_in"] == ingest["valid"] + ingest["duplicates"] + ingest["rejected"] + ingest["plates_waiting"]
    assert ingest["rejected"] == 11  # bad VIN cells and a plate without a state; not the plates to look up
    assert "Plan:" not in out  # stdout holds the JSON only


def test_dry_run_reads_the_published_database_and_leaves_every_file_as_it_was(tmp_path):
    db = tmp_path / "fleet.duckdb"
    vins = build_database(db, fresh_specs=100)
    before = files_of(tmp_path)
    assert {"fleet.duckdb", "fleet.duckdb.working"} <= set(before)

    code, out, err, prefect = fleet("refresh", str(SAMPLE), "--db", str(db), "--dry-run", "--json",
                                    "--datasets", "specs,history")
    assert code == 0, err
    assert prefect == []
    assert files_of(tmp_path) == before  # nothing written, created or touched
    specs = json.loads(out)["datasets"]["specs"]
    assert specs["skipped_fresh"] == 100 and specs["planned"] == len(vins) - 100  # read from the published file

    code, out, err, _ = fleet("refresh", str(SAMPLE), "--db", str(db), "--dry-run", "--datasets", "specs")
    assert code == 0, err
    assert f"{len(vins) - 100} calls" in err  # the plan, as the user sees it, before anything would start
    assert "planned" in out
    assert files_of(tmp_path) == before


@pytest.mark.parametrize("which", [["--failures"], ["--failures-of", "run-1"], ["--reparse"]])
def test_a_backfill_with_nothing_to_do_says_so_without_prefect(tmp_path, which):
    db = tmp_path / "fleet.duckdb"
    build_database(db, fresh_specs=10)
    code, out, err, prefect = fleet("backfill", *which, "--db", str(db), "--lake", "")
    assert code == 0, err
    assert "nothing to do" in out
    assert prefect == []
    with open_database(str(db)) as store:
        assert store.sql("SELECT run_id FROM runs").rows() == [("run-1",)]  # no run recorded for nothing


def test_a_backfill_with_something_to_do_is_not_taken_for_nothing(tmp_path):
    """The other side of the fast path: with an open failure the backfill needs Prefect (unreachable here)."""
    db = tmp_path / "fleet.duckdb"
    build_database(db, fresh_specs=10, failures=True)
    _, out, _, prefect = fleet("backfill", "--failures", "--db", str(db), "--lake", "", "--json")
    assert "nothing to do" not in out
    assert prefect != []  # it went on to start the flow


def test_a_refresh_with_nothing_due_answers_without_prefect(tmp_path):
    """Every VIN fresh: the run is recorded, the lake and report written, and no Prefect server is started."""
    db = tmp_path / "fleet.duckdb"
    vins = build_database(db, fresh_specs=10**6)
    lake = tmp_path / "lake"
    code, out, err, prefect = fleet("refresh", str(SAMPLE), "--db", str(db), "--datasets", "specs", "--no-plates",
                                    "--lake", str(lake), "--json")
    assert code == 0, err
    assert prefect == []  # answered without Prefect: no server could have started
    summary = json.loads(out)
    assert (summary["status"], summary["calls"], summary["units"]) == ("completed", 0, 0)
    assert summary["datasets"]["specs"]["skipped_fresh"] == len(vins)
    assert Path(summary["report"]).is_file() and (lake / "vehicles").is_dir()
    with open_database(str(db)) as store:
        assert store.sql("SELECT run_id = $run, status FROM runs ORDER BY started_at", {"run": summary["run_id"]}).rows() \
            == [(False, "completed"), (True, "completed")]
        assert store.sql("SELECT count(*) FROM run_datasets WHERE run_id = $run", {"run": summary["run_id"]}).rows() == [(1,)]


def test_a_refresh_with_nothing_due_does_not_import_pandas(tmp_path):
    """pyarrow imports pandas, where it is installed (0.3 s), the first time a Python value becomes Arrow: the
    landing's constant columns and the lake's partition keys are made through polars, so a run with nothing
    due never pays for it (`make test` runs where pandas is installed)."""
    pytest.importorskip("pandas")
    db = tmp_path / "fleet.duckdb"
    build_database(db, fresh_specs=10**6)
    code, _, err, pandas = fleet("refresh", str(SAMPLE), "--db", str(db), "--datasets", "specs", "--no-plates",
                                 "--lake", str(tmp_path / "lake"), "--json", top="pandas")
    assert code == 0, err
    assert pandas == []


def test_a_refresh_with_something_due_is_not_taken_for_nothing(tmp_path):
    db = tmp_path / "fleet.duckdb"
    build_database(db, fresh_specs=10)
    code, _, _, prefect = fleet("refresh", str(SAMPLE), "--db", str(db), "--datasets", "specs", "--no-plates", "--json")
    assert prefect != []  # it went on to start the flow (Prefect is unreachable here)
    with open_database(str(db)) as store:
        assert store.sql("SELECT count(*) FROM runs WHERE status = 'completed'").rows() == [(1,)]
