"""Landing the same answers again: data unchanged, receipt moved on; a changed answer still replaces.

The upserts take a cheaper path for rows whose data is identical (only `run_id`/`fetched_at` move),
measured by tests/bench/test_raw_first_bench.py; these tests hold the rows to what a whole-row update
gives, for every table that takes that path.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

import orjson
import pytest

from fleet_data.connectors.sandbox import valuation as sandbox_values
from fleet_data.connectors.sandbox import vehicles as sandbox_vehicles
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.land.landing import land_enrichment

VINS = ["1HGCM82633A004352", "1HGCM82633A004353", "1FTFW1ET5DFC10312"]
T0 = datetime(2026, 5, 1, 12, tzinfo=timezone.utc)
TABLES = {"specs": "specs", "market_value": "market_values", "history": "history_reports"}


def body(dataset: str, vin: str) -> dict:
    return copy.deepcopy({
        "specs": lambda: {"input": {"vin": vin}, **sandbox_vehicles.specs(vin)},
        "market_value": lambda: sandbox_values.market_value_v2(vin, None, None, None),
        "history": lambda: sandbox_vehicles.history(vin),
    }[dataset]())


def land(db, run: str, dataset: str, bodies: dict[str, dict], at: datetime) -> None:
    found = [(vin, orjson.dumps(b), at) for vin, b in bodies.items()]
    land_enrichment(db, db.start_run("refresh", [], {}, run_id=run, started_at=at), ChunkResult(dataset, found=found))


def rows(db, table: str) -> dict[str, dict]:
    frame = db.sql(f"SELECT * FROM {table} ORDER BY vin")  # noqa: S608 - a table name of this test
    return {r["vin"]: r for r in frame.to_dicts()}


@pytest.mark.parametrize("dataset", list(TABLES))
def test_the_same_answers_again_move_only_the_receipt(db, dataset):
    table = TABLES[dataset]
    bodies = {vin: body(dataset, vin) for vin in VINS}
    land(db, "r1", dataset, bodies, T0)
    first = rows(db, table)
    land(db, "r2", dataset, bodies, T0 + timedelta(minutes=5))
    again = rows(db, table)
    assert again.keys() == first.keys() and first
    for vin, row in again.items():
        assert (row["run_id"], row["fetched_at"], row["run_seq"]) == ("r2", T0 + timedelta(minutes=5), 2)
        receipt = ("run_id", "fetched_at", "run_seq")  # which run, when, in which order
        unchanged = {k: v for k, v in row.items() if k not in receipt}
        assert unchanged == {k: v for k, v in first[vin].items() if k not in receipt}


def test_a_changed_answer_still_replaces_and_an_older_one_does_not(db):
    bodies = {vin: body("specs", vin) for vin in VINS}
    db.start_run("refresh", [], {}, run_id="r0", started_at=T0 - timedelta(minutes=5))  # the run before r1
    land(db, "r1", "specs", bodies, T0)
    changed = copy.deepcopy(bodies)
    changed[VINS[0]]["attributes"]["trim"] = "Changed trim"
    land(db, "r2", "specs", changed, T0 + timedelta(minutes=5))
    land(db, "r0", "specs", bodies, T0 - timedelta(minutes=5))  # a late replay of an older answer
    held = rows(db, "specs")
    assert held[VINS[0]]["trim"] == "Changed trim" and held[VINS[0]]["run_id"] == "r2"
    assert all(held[v]["run_id"] == "r2" for v in VINS)
