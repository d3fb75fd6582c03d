"""kill -9 a real `fleet refresh` while a plate lookup or a recall batch submit is billed and unanswered: the
ledger's known + unknown units are at least what the service billed, and nothing answered before the kill
is bought again.

The sandbox runs in its own process and its per-key billing is the referee; the refresh reaches it through a
proxy that holds each answer a while after the sandbox has billed it (tests/holding_proxy.py), so the calls in
flight at the kill are billed and never answered.
Before plate lookups and batch calls were journalled, a killed run's plate calls were never recorded (they
landed at the end of the lookups), so the next run bought every plate again and the ledger missed the first
run's; a batch submit in flight was in no ledger until a run resumed its batch.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from fleet_data.connectors.sandbox import Sandbox
from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import RefreshOptions
from fleet_data.tasks.store.database import open_database

from tests.holding_proxy import HoldingProxy
from tests.killing import run_then_kill

from .conftest import sample_rows

ROOT = Path(__file__).resolve().parents[2]
BOUND = 420  # seconds: a hang guard for a loaded box, not a timing
pytestmark = [pytest.mark.usefixtures("prefect_server"), pytest.mark.timeout(3 * BOUND)]
KEY = "kill_ledger_plates_key"
PLATE = "/v2/platedecoder"
SUBMIT = "/v1/recalls-batch/submit"
PLATES = 24
CONCURRENCY = 4


@pytest.fixture
def slow_sandbox():
    """The sandbox (answers at once, bills as it answers) behind a proxy that holds each answer 0.3-0.5 s."""
    sandbox = Sandbox.start_subprocess(["--journal"])
    try:
        with HoldingProxy(sandbox.url) as proxy:
            sandbox.proxy = proxy  # type: ignore[attr-defined]
            yield sandbox
    finally:
        sandbox.stop()


def _refresh_command(fleet: Path, db: str, datasets: str) -> list[str]:
    return [sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fleet), "--db", db, "--lake", "",
            "--datasets", datasets, "--concurrency", str(CONCURRENCY)]


def _kill_when(command: list[str], sandbox: Sandbox, log: Path, ready) -> None:  # noqa: ANN001
    """Run `command` against the proxy and kill -9 it once `ready(stats, answers held)`; then wait until the
    proxy holds no answer: every call in flight at the kill was billed, none answered."""
    from prefect.settings import PREFECT_API_URL

    proxy = sandbox.proxy  # type: ignore[attr-defined]
    env = {**os.environ, "VDS_BASE_URL": proxy.url, "VDS_API_KEY": KEY, "PYTHONPATH": str(ROOT),
           "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_LOGGING_TO_API_ENABLED": "false"}
    run_then_kill(command, env, log, lambda: ready(sandbox.stats(), proxy.holding), bound=BOUND)
    settled = time.monotonic() + 30
    while proxy.holding or sandbox.stats()["in_flight"]:
        assert time.monotonic() < settled, "the answers held at the kill were never let go"
        time.sleep(0.1)


def _served(stats: dict, endpoint: str) -> int:
    return sum(r["count"] for r in stats["requests"] if r["key"] == KEY and r["endpoint"] == endpoint)


def _rows(db: str, sql: str) -> list[tuple]:
    with open_database(db) as store:
        return store.sql(sql).rows()


def _ledger(db: str) -> tuple[int, int]:
    """(known, unknown) units of the whole ledger."""
    return _rows(db, "SELECT coalesce(sum(units) FILTER (WHERE billing = 'known'), 0), "
                     "coalesce(sum(units) FILTER (WHERE billing = 'unknown'), 0) FROM api_calls")[0]


def test_a_refresh_killed_during_its_plate_lookups_leaves_every_billed_lookup_in_the_ledger(
        slow_sandbox, tmp_path, monkeypatch):
    fleet = tmp_path / "plates.csv"
    pl.DataFrame({"unit": [f"P{i:03d}" for i in range(PLATES)], "plate": [f"KL{i:04d}" for i in range(PLATES)],
                  "state": ["TX"] * PLATES}).write_csv(fleet)
    db = str(tmp_path / "fleet.duckdb")
    _kill_when(_refresh_command(fleet, db, "specs"), slow_sandbox, tmp_path / "killed.log",
               lambda stats, held: _served(stats, PLATE) >= 6 and held >= 2)
    billed_by_killed, asked_before = slow_sandbox.units(KEY), _served(slow_sandbox.stats(), PLATE)
    assert billed_by_killed >= 2

    # The same service again: a lookup stands only for the service that answered it (its base URL, here the
    # proxy's), so a run that called the sandbox by its own URL would rightly look every plate up again.
    proxy = slow_sandbox.proxy  # type: ignore[attr-defined]
    proxy.hold = (0.0, 0.0)  # nothing is killed now: answers need not be held
    monkeypatch.setenv("VDS_BASE_URL", proxy.url)
    monkeypatch.setenv("VDS_API_KEY", KEY)
    resumed = refresh_fleet([str(fleet)], RefreshOptions(db=db, lake=None, datasets=["specs"], concurrency=CONCURRENCY))
    assert resumed["status"] == "completed"

    billed = slow_sandbox.units(KEY)
    known, possible = _ledger(db)
    print(f"billed {billed} ({billed_by_killed} before the kill), recorded {known} known + {possible} possible")
    assert known + possible >= billed, "the ledger under-reports what the service billed"
    assert known <= billed
    killed_run = _rows(db, "SELECT run_id FROM runs ORDER BY started_at LIMIT 1")[0][0]
    unknown = _rows(db, f"SELECT count(*) FROM api_calls WHERE billing = 'unknown' AND endpoint = '{PLATE}' "
                        f"AND run_id = '{killed_run}'")[0][0]
    assert 2 <= unknown <= CONCURRENCY  # the lookups in flight at the kill, no more
    # Each lookup answered before the kill landed from the journal, under the killed run...
    landed = _rows(db, f"SELECT count(*) FROM plate_resolutions WHERE run_id = '{killed_run}'")[0][0]
    assert landed == asked_before - unknown
    assert resumed["plates"]["lookups"] == PLATES - landed  # ... and the resumed run did not plan them again
    # ... so the only plates looked up twice are those in flight at the kill.
    asked = Counter(c["target"] for c in slow_sandbox.journal() if c["key"] == KEY and c["endpoint"] == PLATE)
    assert len(asked) == PLATES and sum(asked.values()) == PLATES + unknown


def test_a_refresh_killed_with_its_recall_batch_submit_in_flight_leaves_it_in_the_ledger(
        slow_sandbox, tmp_path, monkeypatch):
    fleet = tmp_path / "fleet.csv"
    sample_rows(40).write_csv(fleet)
    db = str(tmp_path / "fleet.duckdb")
    # With recalls alone, the first call is the batch submit: kill while the service holds it.
    _kill_when(_refresh_command(fleet, db, "recalls"), slow_sandbox, tmp_path / "killed.log",
               lambda stats, held: _served(stats, SUBMIT) and held)
    assert _served(slow_sandbox.stats(), SUBMIT) == 1
    billed = slow_sandbox.units(KEY)
    assert billed == 40  # a unit per VIN, billed though the refresh was gone

    monkeypatch.setenv("VDS_BASE_URL", slow_sandbox.url)
    monkeypatch.setenv("VDS_API_KEY", KEY)
    # A run that leaves recalls alone still lands the killed run's journal: the submit is in the ledger.
    other = refresh_fleet([str(fleet)], RefreshOptions(db=db, lake=None, datasets=["specs"], concurrency=CONCURRENCY))
    assert other["status"] == "completed"
    killed_run = _rows(db, "SELECT run_id FROM runs ORDER BY started_at LIMIT 1")[0][0]
    submit = _rows(db, f"SELECT units, billing, batch_id LIKE 'pending:%' FROM api_calls WHERE endpoint = '{SUBMIT}'")
    assert submit == [(40, "unknown", True)]
    known, possible = _ledger(db)
    billed = slow_sandbox.units(KEY)
    print(f"after the kill and a specs run: billed {billed}, recorded {known} known + {possible} possible")
    assert known + possible >= billed

    # The run that resumes the batch replays the submit (free): it proves the first was billed, once.
    resumed = refresh_fleet([str(fleet)], RefreshOptions(db=db, lake=None, datasets=["recalls"],
                                                         concurrency=CONCURRENCY))
    assert resumed["status"] == "completed"
    assert _served(slow_sandbox.stats(), SUBMIT) == 2
    known, possible = _ledger(db)
    # Known at last, and not twice: the killed run's submit is the acceptance, the replay cost nothing.
    assert (known, possible) == (slow_sandbox.units(KEY), 0)
    assert _rows(db, f"SELECT run_id, units, billing FROM api_calls WHERE endpoint = '{SUBMIT}' AND units > 0") == [
        (killed_run, 40, "known")]
