"""A refresh killed with SIGKILL at any point, started again, ends as if never interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from connectors.sandbox import Sandbox
from flows.refresh import refresh_fleet

pytestmark = pytest.mark.usefixtures("prefect_server")
ROOT = Path(__file__).resolve().parents[2]
KEY = "resume_test_key"

# What must end identical, whatever the interruption: everything but run ids and times.
COMPARE = {
    "vehicles": "SELECT vin, unit_number, plate, state, mileage FROM vehicles",
    "specs": "SELECT * EXCLUDE (run_id, fetched_at) FROM specs",
    "market_values": "SELECT * EXCLUDE (run_id, fetched_at) FROM market_values",
    "history_reports": "SELECT * EXCLUDE (run_id, fetched_at) FROM history_reports",
    "lien_theft_events": "SELECT * EXCLUDE (run_id, fetched_at) FROM lien_theft_events",
    "recalls": "SELECT * EXCLUDE (run_id, fetched_at, first_seen_at, first_seen_run_id, last_seen_at) FROM recalls",
    "batch_checks": "SELECT vin, has_recalls, recall_count FROM recall_checks WHERE checked_via = 'batch'",
    "fetch_status": "SELECT vin, dataset, outcome FROM fetch_status",
    "failures": "SELECT vin, dataset FROM failures WHERE resolved_at IS NULL",
}


@pytest.fixture
def slow_sandbox():
    """In its own process, so it outlives the killed refresh; slow enough to kill mid-way."""
    sandbox = Sandbox.start_subprocess(["--latency-ms", "40", "--batch-rate", "12"])
    yield sandbox
    sandbox.stop()


def _api_url() -> str:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value()


def _start_refresh(fleet: str, db: str, sandbox: Sandbox) -> subprocess.Popen:
    env = {**os.environ, "VDS_BASE_URL": sandbox.url, "VDS_API_KEY": KEY, "PREFECT_API_URL": _api_url(),
           "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "flows.cli", "refresh", fleet, "--db", db, "--lake", "",
               "--chunk-size", "4", "--concurrency", "2"]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill_when(process: subprocess.Popen, ready, limit: float = 90.0) -> None:
    deadline = time.monotonic() + limit
    while not ready():
        if process.poll() is not None:
            raise AssertionError(f"refresh ended before the kill point: {process.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("kill point never reached")
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def _snapshot(read, db: str) -> dict[str, list]:
    return {name: sorted(read(db, sql), key=repr) for name, sql in COMPARE.items()}


@pytest.mark.parametrize(
    "kill_point",
    ["after_batch_submit", "mid_enrichment"],
)
def test_killed_refresh_resumes_without_paying_twice(kill_point, slow_sandbox, fleet_file, tmp_path, read, monkeypatch):
    fleet = fleet_file(24)
    db = str(tmp_path / "killed.duckdb")
    sandbox = slow_sandbox
    process = _start_refresh(fleet, db, sandbox)
    if kill_point == "after_batch_submit":
        _kill_when(process, lambda: sandbox.count("/v1/recalls-batch/submit", key=KEY) >= 1)
    else:
        _kill_when(process, lambda: sandbox.count("/v2/marketvalue", key=KEY) >= 6)
    assert process.returncode == -signal.SIGKILL

    monkeypatch.setenv("VDS_BASE_URL", sandbox.url)
    monkeypatch.setenv("VDS_API_KEY", KEY)
    before = {e: sandbox.count(e, key=KEY) for e in ("/specs", "/v1/recalls-batch/submit")}
    resumed = refresh_fleet([fleet], db=db, lake=None, chunk_size=4, concurrency=2)
    assert resumed["status"] == "completed"
    # Never pay twice: the batch submitted before the kill is polled, not submitted again (a kill
    # between the service accepting it and the ledger learning its id ends in one free replay under
    # the same idempotency key), and specs that landed before the kill are not asked for again.
    submits = sandbox.count("/v1/recalls-batch/submit", key=KEY)
    assert submits in (1, 2)
    assert read(db, "SELECT count(DISTINCT batch_id), count(DISTINCT idempotency_key) FROM recall_batches") == [(1, 1)]
    detail_units = sum(sandbox.count(e, key=KEY, status=200) for e in ("/v1/recalls", "/v1/recalls-ymm"))
    assert sandbox.units(KEY, "recalls") == 24 + detail_units  # the batch was billed once
    landed_specs = read(db, "SELECT count(*) FROM fetch_status WHERE dataset = 'specs'")[0][0]
    assert sandbox.count("/specs", key=KEY) - before["/specs"] == resumed["datasets"]["specs"]["planned"]
    assert landed_specs == 24

    staging = Path(db).parent / "staging"
    assert [p.name for p in staging.iterdir()] == ["recall_batches"]  # the killed run's due lists are gone
    assert not list((staging / "recall_batches").iterdir())  # and every batch's VIN list, once landed

    # The same fleet refreshed without interruption, on a fresh database, ends identical.
    monkeypatch.setenv("VDS_API_KEY", "reference_key")
    reference = str(tmp_path / "reference.duckdb")
    refresh_fleet([fleet], db=reference, lake=None, chunk_size=4, concurrency=2)
    assert _snapshot(read, db) == _snapshot(read, reference)
