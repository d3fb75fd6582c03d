"""Unknown is NULL, never 0, false or an empty list (issue 26): every view of the schema, walked.

One vehicle has an answer for every dataset (the sandbox's answers, through the result models and the landing every
refresh takes). For each dataset of the registry in turn (tasks/datasets.py), and for all of them at once, its
answers are taken away inside a transaction (the rows of the dataset's tables for that vehicle, and its
`fetch_status`: the vehicle was never asked), every view is read again, and a rollback puts them back. Each row a
view gives without the answers must be one of the rows it gave with them, column for column, or NULL where it
differs: what the dataset told becomes unknown, never a zero. Only a fallback that says where it comes from may
differ otherwise (FALLBACKS). The views are listed from DuckDB's catalog, so a new view is walked without being
named here; so is a new dataset.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import pytest

from fleet_data.connectors import models as m
from fleet_data.connectors.sandbox import recalls as sandbox_recalls
from fleet_data.connectors.sandbox import valuation as sandbox_values
from fleet_data.connectors.sandbox import vehicles as sandbox_vehicles
from fleet_data.tasks.datasets import REGISTRY
from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.land.landing import fetch_status_frame, land_enrichment
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.store.database import open_database

VIN = "1HGCM82633A004352"  # the spec's example VIN: data everywhere, open recalls, lien/theft events, an owner
NOW = datetime.now(UTC).replace(microsecond=0)
# Columns that fall back to another source when one is unknown, each with a column saying which: not a zero.
FALLBACKS = {
    ("vehicle_overview", "make_source"),  # specs, valuation, fleet_file: where `make` came from
    ("vehicle_overview", "recall_status"),  # not_checked: the label for "unknown"
    ("vehicle_mileage", "valuation_mileage"),  # the file's mileage when no reading: valuation_mileage_source
    ("vehicle_mileage", "valuation_mileage_unit"),
    ("vehicle_mileage", "valuation_mileage_source"),
    ("mileage_conflicts", "reason"),  # its words say what the valuation asked with, or "not valued yet"
    ("vin_status", "status"),  # never_asked: the label for "unknown", as recall_status's not_checked
}


def _answers() -> dict[str, tuple[Any, ...]]:
    """What each fetch lands for VIN: (result model, the sandbox's body), made rich enough that no column a dataset
    fills reads 0, false or [] with its answer (else a zero shown for "never asked" would go unseen)."""
    vin = VIN
    specs = copy.deepcopy({"input": {"vin": vin}, **sandbox_vehicles.specs(vin)})
    specs["attributes"]["vid"] = "V1"  # decoded by the international fallback: is_international is true
    history = copy.deepcopy(sandbox_vehicles.history(vin))
    history.update(brandsInformation=[{"brand": "Salvage", "date": "2024-02-01"}], brandsRecordCount=1, vinChanged=True)
    lien_theft = copy.deepcopy(sandbox_vehicles.lien_theft(vin))
    lien_theft["events"] += [{"event": "Lien", "location": "TX", "details_list": ["Date: 2024-01-09", "Lienholder: Ally"]},
                             {"event": "Theft", "location": "TX", "details_list": ["Date: 2025-05-01"]}]
    return {
        "specs": (m.SpecsResult, specs),
        "market_value": (m.MarketValue, sandbox_values.market_value_v2(vin, "TX", 94000, "clean")),
        "history": (m.HistoryReport, history),
        "lien_theft": (m.LienTheftResult, lien_theft),
        "recall_details": (m.RecallReport, {"data": sandbox_recalls.recall_report(vin)}),
        "ownership": (m.OwnershipResult, _ownership(vin)),
    }


def _ownership(vin: str) -> dict:
    found = sandbox_vehicles.ownership(vin)
    assert found is not None
    return {"vin": vin, "vehicle": found[0], "owners": list(found[1]), "error": ""}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with open_database(tmp_path_factory.mktemp("unknown") / "fleet.duckdb") as db:
        run = db.start_run("refresh", ["fleet.csv"], run_id="r1", started_at=NOW - timedelta(minutes=5))
        db.land("vehicles", pl.DataFrame({"vin": [VIN], "unit_number": ["U1"], "state": ["TX"], "mileage": [5000],
                                          "condition": ["clean"], "fleet": ["North"]}), run, fetched_at=NOW)
        asked = {VIN: {"state": "TX", "mileage": 94000, "mileage_unit": "mi", "condition": "clean",
                       "mileage_source": "history", "country": "US"}}
        for fetched_as, (model, body) in _answers().items():
            answer = model.from_payload({"success": True, **copy.deepcopy(body)})
            land_enrichment(db, run, ChunkResult(fetched_as, found=[(VIN, answer, NOW)], requests=asked))
        item = m.BatchResultItem(vin=VIN, hasRecalls=True, recallCount=len(sandbox_recalls.open_recalls(VIN)))
        db.land_chunk({"recall_checks": staging.recall_checks_from_batch([item], "b1", NOW - timedelta(minutes=1)),
                       "fetch_status": fetch_status_frame("recalls", [(VIN, NOW)], [])}, run)
        # And a campaign only its model's list names, saying park it: likely, beside the confirmed ones.
        db.land("recalls", pl.DataFrame([{"vin": VIN, "nhtsa_campaign_number": "26V999000", "component": "AIR BAGS",
                                          "park_it": True, "matched_by": "model", "fetched_at": NOW}]), run)
        db.finish_run(run, "completed", finished_at=NOW)
        # A later run values it again, 30% lower: a change, so the change views have a row too.
        later = db.start_run("refresh", ["fleet.csv"], run_id="r2", started_at=NOW + timedelta(minutes=1))
        moved = sandbox_values.market_value_v2(VIN, "TX", 94000, "clean", 0.7)
        answer = m.MarketValue.from_payload({"success": True, **copy.deepcopy(moved)})
        land_enrichment(db, later, ChunkResult("market_value", found=[(VIN, answer, NOW + timedelta(minutes=2))],
                                               requests=asked))
        db.finish_run(later, "completed", finished_at=NOW + timedelta(minutes=3))
        yield db


def _views(db) -> list[str]:
    return db.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main' "
                  "AND database_name = current_database() ORDER BY 1")["view_name"].to_list()


def _read(db) -> dict[str, list[dict[str, Any]]]:
    # View names come from DuckDB's own catalog, never from input.
    return {view: db.connection.sql(f"SELECT * FROM {view}").pl().to_dicts() for view in _views(db)}


def _without(db, datasets: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Every view as it reads once `datasets` never answered for VIN (rolled back after)."""
    con = db.connection
    con.execute("BEGIN TRANSACTION")
    try:
        for name in datasets:
            for table in REGISTRY[name].tables:  # identifiers from the registry, values bound
                con.execute(f"DELETE FROM {table.name} WHERE vin = $vin", {"vin": VIN})
            con.execute("DELETE FROM fetch_status WHERE vin = $vin AND dataset = $d", {"vin": VIN, "d": name})
        return _read(db)
    finally:
        con.execute("ROLLBACK")


def _unknown_shown_as_known(view: str, row: dict[str, Any], full: list[dict[str, Any]]) -> list[str]:
    """The columns where `row` says something its closest row with the answers did not: [] when it is one of them
    with only NULLs (or FALLBACKS) where it differs."""
    best: list[str] | None = None
    for known in full:
        wrong = [f"{c}={row[c]!r} (with the answers: {known[c]!r})" for c in row
                 if row[c] is not None and row[c] != known[c] and (view, c) not in FALLBACKS]
        if best is None or len(wrong) < len(best):
            best = wrong
    return best if best is not None else [f"a row the answers never gave: {row}"]


@pytest.mark.parametrize("datasets", [[name] for name in REGISTRY] + [list(REGISTRY)],
                         ids=[*REGISTRY, "all"])
def test_a_vehicle_never_asked_for_a_dataset_reads_null_not_zero_in_every_view(store, datasets):
    full = _read(store)
    assert len(full) >= 15 and all(full[v] for v in ("vehicle_overview", "open_recalls", "lien_theft_records", "changes_latest_run",
                                                     "trade_in_by_month", "vehicle_value_change", "mileage_conflicts"))
    found = {}
    for view, rows in _without(store, datasets).items():
        wrong = [w for row in rows for w in _unknown_shown_as_known(view, row, full[view])]
        if wrong:
            found[view] = wrong
    assert found == {}


def test_lien_theft_events_is_null_for_a_vehicle_never_asked(store):
    """The issue's example: vehicle_overview.lien_theft_events said 0 for vehicles never asked."""
    asked = store.sql("SELECT lien_theft_events, active_liens FROM vehicle_overview").row(0)
    never = _without(store, ["lien_theft"])["vehicle_overview"][0]
    assert asked[0] > 0 and (never["lien_theft_events"], never["active_liens"]) == (None, None)
