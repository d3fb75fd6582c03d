"""kill -9 a real `fleet refresh` with calls in flight, run it again: the ledger never under-reports what the
service billed, and nothing answered before the kill is bought again.

The sandbox runs in its own process with a latency long enough that every call slot is mid-call at any
instant; its per-key billing is the referee. The refresh is killed as soon as the service has answered a
number of its calls, not at a quiet point: several calls are in flight then, and the service answers (and
bills) them after the process is gone. Before the ledger journalled each call before sending it, those
calls were paid, never recorded in `api_calls`, and bought again by the next run; so were the answers of the
journal's last 20 ms. Now each call in flight is in `api_calls` as `billing = 'unknown'` with what it may have
cost, and the only calls the second run buys again are those.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from fleet_data.connectors.sandbox import Sandbox
from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import RefreshOptions
from fleet_data.tasks.store.database import open_database

from tests.killing import run_then_kill

from .conftest import sample_rows

ROOT = Path(__file__).resolve().parents[2]
BOUND = 420  # seconds: a hang guard for a loaded box, not a timing
pytestmark = [pytest.mark.usefixtures("prefect_server"), pytest.mark.timeout(BOUND + 240)]
KEY = "kill_ledger_key"
DATASETS = {"specs": "/specs", "market_value": "/v2/marketvalue", "history": "/history"}
OPTIONS = dict(lake=None, chunk_size=8, concurrency=4, datasets=list(DATASETS))
FLEET = 40
LATENCY = ["--latency-ms", "300-500", "--journal"]  # every slot mid-call most of the time
KILL_AFTER = 12  # paid answers served to the refresh before it is killed


@pytest.fixture
def slow_sandbox():
    sandbox = Sandbox.start_subprocess(LATENCY)  # its own process: it serves (and bills) the calls in flight at the kill
    yield sandbox
    sandbox.stop()


def _served(sandbox: Sandbox) -> int:
    return sum(r["count"] for r in sandbox.stats()["requests"]
               if r["key"] == KEY and r["endpoint"] in DATASETS.values() and r["status"] == 200)


def _paid(sandbox: Sandbox) -> Counter:
    return Counter((c["endpoint"], c["vin"]) for c in sandbox.journal()
                   if c["key"] == KEY and c["endpoint"] in DATASETS.values() and c["status"] == 200)


def _rows(db: str, sql: str) -> list[tuple]:
    with open_database(db) as store:
        return store.sql(sql).rows()


def test_a_refresh_killed_with_calls_in_flight_never_under_reports_nor_buys_an_answer_twice(
        slow_sandbox, tmp_path, monkeypatch):
    from prefect.settings import PREFECT_API_URL

    fleet = tmp_path / "fleet.csv"
    sample_rows(FLEET).write_csv(fleet)
    db = str(tmp_path / "fleet.duckdb")
    env = {**os.environ, "VDS_BASE_URL": slow_sandbox.url, "VDS_API_KEY": KEY, "PYTHONPATH": str(ROOT),
           "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_LOGGING_TO_API_ENABLED": "false"}
    command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fleet), "--db", db, "--lake", "",
               "--datasets", ",".join(DATASETS), "--chunk-size", str(OPTIONS["chunk_size"]),
               "--concurrency", str(OPTIONS["concurrency"])]
    log = tmp_path / "killed.log"
    run_then_kill(command, env, log, lambda: _served(slow_sandbox) >= KILL_AFTER, bound=BOUND, poll=0.02)
    # The calls in flight at the kill reach the service, which answers and bills them (latency at most 0.5 s).
    settled = time.monotonic() + 30
    while slow_sandbox.stats()["in_flight"]:
        assert time.monotonic() < settled, "the calls in flight at the kill were never served"
        time.sleep(0.1)
    before = _paid(slow_sandbox)
    assert sum(before.values()) >= KILL_AFTER

    monkeypatch.setenv("VDS_BASE_URL", slow_sandbox.url)
    monkeypatch.setenv("VDS_API_KEY", KEY)
    resumed = refresh_fleet([str(fleet)], RefreshOptions(db=db, **OPTIONS))
    assert resumed["status"] == "completed"

    billed = slow_sandbox.units(KEY)
    (recorded,) = _rows(db, "SELECT sum(units) FROM api_calls")[0]
    print(f"billed {billed}, recorded {recorded}")
    assert recorded >= billed, "the ledger under-reports what the service billed"
    known, possible = _rows(db, "SELECT coalesce(sum(units) FILTER (WHERE billing = 'known'), 0), "
                                "coalesce(sum(units) FILTER (WHERE billing = 'unknown'), 0) FROM api_calls")[0]
    print(f"of which {known} known + {possible} possible")
    assert known <= billed  # what the service's answers said they cost, and no more

    # Bought twice: only calls in flight at the kill, each one in the ledger as unknown under the killed run.
    after = _paid(slow_sandbox)
    twice = {pair for pair, n in after.items() if n > 1}
    killed_run = _rows(db, "SELECT run_id FROM runs ORDER BY started_at LIMIT 1")[0][0]
    unknown = set(_rows(db, f"SELECT endpoint, vin FROM api_calls WHERE billing = 'unknown' AND run_id = '{killed_run}'"))
    assert twice <= unknown, f"answers received before the kill bought again: {twice - unknown}"
    assert all(n <= 2 for n in after.values())
    assert len(unknown) <= len(DATASETS) * OPTIONS["concurrency"]  # no more than were in flight

    # `fleet status` shows the spend as known plus possible.
    from fleet_data.flows.status import fleet_status

    status = fleet_status(db)
    assert status["units_this_month_total"] == known + possible
    assert status["possible_units_this_month_total"] == possible
    killed = next(r for r in status["runs"] if r["run_id"] == killed_run)
    assert killed["possible_units"] == possible  # every call in flight was the killed run's
