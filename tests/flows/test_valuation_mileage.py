"""Valuations are asked with the mileage the view `vehicle_mileage` chooses (issues 21, 26): the fleet file's, unless
the latest history odometer is higher. Refreshes against the sandbox:

- one run asked for history and market values (with a budget: one chunk at a time): the history lands first, so
  each vehicle's first valuation already asks with its best mileage, and says where it came from
  (`market_values.mileage_source`); the to-do list's mileage conflicts say what the valuation was asked with,
  from the view `mileage_conflicts`;
- values first (no history yet: the file's mileage), then again with the history (no budget: datasets side by side,
  valuations waiting for the history): a revaluation at another mileage is its own kind of change, with both
  mileages, never a `value_move`.
"""

from __future__ import annotations

import csv
import json
from types import SimpleNamespace

import polars as pl
import pytest

from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import RefreshOptions
from fleet_data.tasks.datasets import valuation_request

from .conftest import sample_rows

pytestmark = pytest.mark.usefixtures("prefect_server")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox

    folder = tmp_path_factory.mktemp("mileage")
    fleet = folder / "fleet.csv"
    # A condition, so that the service applies the mileage band: a valuation at another mileage moves.
    sample_rows(40).with_columns(pl.lit("clean").alias("condition")).write_csv(fleet)
    together, apart, lake = str(folder / "together.duckdb"), str(folder / "apart.duckdb"), folder / "lake"
    patch = pytest.MonkeyPatch()
    with run_sandbox(SandboxConfig()) as sandbox:
        try:
            patch.setenv("VDS_BASE_URL", sandbox.url)
            patch.setenv("VDS_API_KEY", "mileage_test_key_9b7e")

            def refresh(db: str, **options):
                return refresh_fleet([str(fleet)], RefreshOptions(db=db, chunk_size=8, **options))

            # With a budget, chunks run one at a time (flows/refresh.py); the run below without one runs them side by side.
            first = refresh(together, lake=str(lake), datasets=["market_value", "history"], max_units=1000)
            values_only = refresh(apart, lake=None, datasets=["market_value"])
            again = refresh(apart, lake=None, datasets=["market_value", "history"], fresh={"market_value": "0m"})
        finally:
            patch.undo()
    return SimpleNamespace(first=first, values_only=values_only, again=again, together=together, apart=apart,
                           lake=lake)


def test_the_first_valuation_already_asks_with_the_history_odometer(runs, read):
    assert runs.first["status"] == "completed"
    conflicts = dict(read(runs.together, "SELECT vin, latest_odometer FROM mileage_conflicts"))
    assert len(conflicts) >= 3  # the sample's first 40 vehicles hold some
    valued = {vin: (mileage, source) for vin, mileage, source in
              read(runs.together, "SELECT vin, mileage, mileage_source FROM market_values")}
    chosen = read(runs.together, "SELECT m.vin, v.state, m.valuation_mileage, m.valuation_mileage_unit, v.mileage "
                                 "FROM vehicle_mileage AS m JOIN vehicles AS v USING (vin) WHERE m.vin IN "
                                 "(SELECT vin FROM market_values)")
    assert len(chosen) == len(valued) > 30
    for vin, state, mileage, unit, file_mileage in chosen:
        asked = valuation_request({"state": state, "mileage": mileage, "mileage_unit": unit})
        assert valued[vin][0] == asked["mileage"], vin
        if vin in conflicts:
            assert valued[vin] == (conflicts[vin], "history") and conflicts[vin] > file_mileage, vin
        else:
            assert valued[vin][1] == "fleet_file", vin
    # Every vehicle's history answered before its valuation was asked.
    late = read(runs.together, "SELECT count(*) FROM api_calls AS h JOIN api_calls AS v USING (vin) "
                               "WHERE h.endpoint = '/history' AND v.endpoint = '/v2/marketvalue' "
                               "AND h.fetched_at > v.fetched_at")
    assert late == [(0,)]


def test_the_to_do_list_says_what_the_valuation_was_asked_with(runs, read):
    reasons = dict(read(runs.together, "SELECT vin, reason FROM mileage_conflicts"))
    with open(runs.lake / "todo.csv", encoding="utf-8-sig", newline="") as file:
        todo = {r["vin"]: r["reason"] for r in csv.DictReader(file) if r["category"] == "mileage conflict"}
    assert todo == reasons  # the view's words, not the to-do code's
    for vin, reason in reasons.items():
        odometer = read(runs.together, f"SELECT latest_odometer FROM mileage_conflicts WHERE vin = '{vin}'")[0][0]
        assert reason.endswith(f"was asked with {odometer:,} mi, the reading"), reason
        assert "file's mileage" not in reason


def test_a_revaluation_at_the_history_odometer_is_no_value_move(runs, read):
    assert runs.values_only["status"] == runs.again["status"] == "completed"
    conflicts = dict(read(runs.apart, "SELECT vin, latest_odometer FROM mileage_conflicts"))
    kinds = read(runs.apart, f"SELECT kind, count(*) FROM changes WHERE run_id = '{runs.again['run_id']}' GROUP BY kind")
    assert dict(kinds).get("value_move", 0) == 0
    rows = read(runs.apart, "SELECT vin, before, after FROM changes WHERE kind = 'revaluation'")
    assert len(rows) >= 2  # the mileage bands moved some values beyond the 10% threshold
    for vin, before, after in rows:
        before, after = json.loads(before), json.loads(after)
        assert vin in conflicts
        assert (before["mileage_source"], after["mileage"], after["mileage_source"]) == (
            "fleet_file", conflicts[vin], "history")
        assert before["mileage"] < after["mileage"] and after["retail"] < before["retail"]
    assert runs.again["changes"]["by_kind"].get("revaluation") == len(rows)


def test_side_by_side_each_valuation_waits_for_its_own_history(runs, read):
    """Without a budget the valuations start as the history chunks over their VINs land (flows/refresh.py
    HistoryGate), not once the whole history has: every vehicle's history still answered before its valuation."""
    run = runs.again["run_id"]
    late = read(runs.apart, "SELECT count(*) FROM api_calls AS h JOIN api_calls AS v USING (vin) "
                            "WHERE h.endpoint = '/history' AND v.endpoint = '/v2/marketvalue' "
                            f"AND h.run_id = '{run}' AND v.run_id = '{run}' AND h.fetched_at > v.fetched_at")
    assert late == [(0,)]
    asked = read(runs.apart, f"SELECT count(*) FROM api_calls WHERE endpoint = '/v2/marketvalue' AND run_id = '{run}'")
    assert asked == [(40,)]
