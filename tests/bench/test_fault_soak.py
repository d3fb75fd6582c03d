"""Soak: a 3,000-VIN refresh through `fleet refresh` while 30% of calls fail, the sandbox in its own process.

Faults are mixed (500/502/503/504, hangs the client gives up on, dropped connections, garbled
bodies) and a few test VINs always fail. The invariants of tests/flows/test_faults.py are checked on
the result (they are loaded from there, so both tests hold the same ones): per dataset every VIN is
landed, failed with a reason or pending; the client recorded every call the sandbox served; no
attempt followed a final answer or went past its budget. A second run with faults off lands the rest
and calls for nothing that already landed. Prints calls, retries, failures, units and wall time.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from fleet_data.connectors.sandbox import FaultConfig, Sandbox
from tests.bench.compare.fleets import fleet_vins
from tests.bench.measure import refresh_cli

pytestmark = pytest.mark.bench
ROOT = Path(__file__).resolve().parents[2]
FLEET_SIZE = 3000
SHARE = 0.30


def _invariants():
    spec = importlib.util.spec_from_file_location("fault_invariants", ROOT / "tests" / "flows" / "test_faults.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fleet(path: Path, n: int, magic_vin) -> list[str]:
    vins = set(fleet_vins(n, seed=6, only_with_data=False))  # no test-VIN endings among them
    test_vins = {magic_vin(serial, plant) for serial in ("000404", "000500", "000501", "000502", "000503", "000504")
                 for plant in "ABC"}
    roster = sorted(vins | test_vins)
    pl.DataFrame({"vin": roster, "state": "CA", "mileage": 42_000}).write_csv(path)
    return roster


def _refresh(fleet: Path, db: Path, sandbox: Sandbox, read_timeout: str = "30") -> tuple[float, dict]:
    return refresh_cli(fleet, db, {"VDS_BASE_URL": sandbox.url, "VDS_API_KEY": "soak", "VDS_MAX_RETRY_AFTER": "0",
                                   "VDS_TIMEOUT": read_timeout})


def test_fault_soak(tmp_path):
    checks = _invariants()
    fleet_path, db = tmp_path / "fleet.csv", tmp_path / "fleet.duckdb"
    fleet = set(_fleet(fleet_path, FLEET_SIZE, checks.magic_vin))
    # Hangs outlast the client's read timeout (VDS_TIMEOUT above), so they end on the client's side.
    faults = checks.faults(SHARE, seed=30)
    faults.timeout_seconds = 1.5
    faults.latency_ms = 20
    sandbox = Sandbox.start_subprocess(["--journal"])
    try:
        sandbox.set_faults(faults)
        sandbox.record_journal(True)
        first_wall, first = _refresh(fleet_path, db, sandbox, read_timeout="0.75")
        journal = sandbox.journal()
        run_id = first["run_id"]
        with checks.reader(str(db)) as read:
            checks.assert_every_attempt_was_decided(journal, read, str(db), run_id)
            checks.assert_failures_count_their_attempts(journal, read, str(db), run_id)
            assert read(str(db), "SELECT count(*) FROM api_calls")[0][0] == len(journal)
            landed, failed = {}, {}
            for dataset in [*checks.PER_VIN, "recalls"]:
                landed[dataset], failed[dataset], _ = checks.accounted(read, str(db), run_id, fleet, dataset)
            listed = {v for (v,) in read(str(db), "SELECT vin FROM recall_checks WHERE checked_via <> 'batch'")}
            assert read(str(db), "SELECT count(*) = count(DISTINCT (vin, valued_on, state, mileage, condition)) "
                                 "FROM market_values")[0][0]
            assert not read(str(db), "SELECT dataset, vin FROM raw_responses WHERE vin IS NOT NULL GROUP BY ALL "
                                     "HAVING count(*) > 1")
            retries, spent, possible = read(str(db), "SELECT count(*) FILTER (WHERE attempt > 1), "
                                                     "sum(units) FILTER (WHERE billing = 'known'), "
                                                     "coalesce(sum(units) FILTER (WHERE billing = 'unknown'), 0) "
                                                     "FROM api_calls")[0]  # possible: timeouts, drops (docs/ledger.md)
            errors = dict(read(str(db), "SELECT error_message, count(*) FROM api_calls "
                                        "WHERE error_message IS NOT NULL GROUP BY ALL ORDER BY 2 DESC"))
            open_failures = dict(read(str(db), "SELECT dataset, count(*) FROM failures WHERE resolved_at IS NULL "
                                               "GROUP BY ALL ORDER BY ALL"))
        served = Counter(call["status"] for call in journal)
        assert spent == sandbox.units("soak")  # what we recorded as spent from answers is what the service billed

        sandbox.set_faults(FaultConfig(retry_after_seconds=0, latency_ms=20))
        sandbox.reset_stats()
        second_wall, second = _refresh(fleet_path, db, sandbox)
        again = sandbox.journal()
        for (endpoint, vin), statuses in checks.calls_by_vin(again).items():
            assert vin not in (listed if endpoint == "/v1/recalls" else landed[checks.DATASET_OF[endpoint]])
            assert len(statuses) == checks.MAGIC_ATTEMPTS.get(vin[-6:], 1), (endpoint, vin, statuses)
        always_failing = {v for v in fleet if v[-6:] in checks.ALWAYS_FAILING}
        with checks.reader(str(db)) as read:
            checks.assert_every_attempt_was_decided(again, read, str(db), second["run_id"])
            for dataset in checks.PER_VIN:
                still_open = {v for (v,) in read(str(db), "SELECT vin FROM failures WHERE resolved_at IS NULL "
                                                          f"AND dataset = '{dataset}'")}
                assert still_open == always_failing, dataset
                landed_now = read(str(db), f"SELECT count(*) FROM fetch_status WHERE dataset = '{dataset}'")[0][0]
                assert landed_now == len(fleet) - len(always_failing), dataset
    finally:
        sandbox.stop()

    print(f"\nfault soak, {len(fleet)} VINs x 5 datasets, {SHARE:.0%} of calls failing (sandbox in its own process, "
          f"20 ms latency):\n"
          f"  first run: {first_wall:.1f} s, {len(journal)} calls ({retries} retries), {spent} units (+ {possible} possible), "
          f"status {first['status']}\n"
          f"  served: {served[0]} dropped, {served[500]} x 500, {served[502]} x 502, {served[503]} x 503, "
          f"{served[504]} x 504 (hangs included), {served[404]} x 404, {served[200]} x 200 (garbled ones included)\n"
          f"  failed attempts as the client saw them: {errors}\n"
          f"  left failed with a reason: {open_failures}; pending: "
          f"{ {d: c['pending'] for d, c in first['datasets'].items() if c['pending']} }\n"
          f"  second run, faults off: {second_wall:.1f} s, {len(again)} calls, {second['units']} units; "
          f"failures left open: only the {len(always_failing)} test VINs that always fail")
