"""A VIN-level answer outranks a model-level list (issue 26): the issue's case, end to end against the sandbox.

A default refresh lists each vehicle's campaigns by its own VIN; a cheaper run then checks recalls again and
matches them by model (`--datasets recalls --fresh recalls=0m --recall-details model`). The vehicles whose own
lookups list a park-it or park-outside campaign must stay on the to-do list (todo.csv) and in the headline.
"""

from __future__ import annotations

import csv
from types import SimpleNamespace

import polars as pl
import pytest

from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox
from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import RefreshOptions
from fleet_data.tasks.store.database import open_database

from .conftest import sample_rows

KEY = "evidence_test_key_41c9"
# Of the sample fleet: pairs of the same year/make/model whose own campaigns are all of their model's, one of
# which says park outside (so a model listing settles both), found with connectors/sandbox/recalls.py.
TO_PARK = ["5TDKZRFH9PC362135", "2T1BU4EE2P8135587", "1GCGSCEN9RD336931", "1G1FB1RX5RG105172",
           "2T1BURHE4SL947536", "JTDKARFU6SC997153", "3VWDP7AJ1G4386025", "3VWDP7AJXG1466585"]
OTHERS = ["JTDKARFU4HL133505", "4T1B11HKXHE375289", "WBA3A5C56G0915102"]  # settled by model, nothing to park; none


def _todo(lake) -> list[tuple[str, str, str]]:
    with open(lake / "todo.csv", encoding="utf-8-sig", newline="") as file:
        return sorted((r["category"], r["vin"], r["reason"]) for r in csv.DictReader(file) if "park" in r["category"])


def _state(db: str) -> tuple[dict, list[tuple]]:
    with open_database(db) as store:
        headline = store.query("report_headline").row(0, named=True)
        park = store.sql("SELECT vin, nhtsa_campaign_number, matched_by FROM open_recalls "
                         "WHERE park_it OR park_outside ORDER BY ALL").rows()
    return headline, park


@pytest.fixture(scope="module")
def runs(prefect_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("evidence")
    fleet, db, lake = folder / "fleet.csv", str(folder / "fleet.duckdb"), folder / "lake"
    sample_rows(1000).filter(pl.col("vin").is_in(TO_PARK + OTHERS)).write_csv(fleet)
    patch = pytest.MonkeyPatch()
    with run_sandbox(SandboxConfig()) as sandbox:
        try:
            patch.setenv("VDS_BASE_URL", sandbox.url)
            patch.setenv("VDS_API_KEY", KEY)
            first = refresh_fleet([str(fleet)], RefreshOptions(db=db, lake=str(lake)))
            before = (_todo(lake), *_state(db))
            listings = sandbox.count("/v1/recalls-ymm")
            cheaper = refresh_fleet([str(fleet)], RefreshOptions(db=db, lake=str(lake), datasets=["recalls"],
                                                                  fresh={"recalls": "0m"}, recall_details="model"))
            listings = sandbox.count("/v1/recalls-ymm") - listings
            after = (_todo(lake), *_state(db))
        finally:
            patch.undo()
    return SimpleNamespace(first=first, cheaper=cheaper, before=before, after=after, listings=listings, db=db)


def test_the_cheaper_run_matched_by_model(runs):
    assert runs.first["status"] == runs.cheaper["status"] == "completed"
    assert runs.listings >= 4  # one listing per model pair: the model route was really taken
    assert runs.cheaper["recall_details"]["by_model"] >= len(TO_PARK)


def test_a_model_matched_run_keeps_every_vehicle_confirmed_to_park(runs):
    todo, headline, park = runs.before
    assert sorted({vin for _, vin, _ in todo}) == sorted(TO_PARK)
    assert headline["vehicles_to_park"] == len(TO_PARK)
    assert {m for _, _, m in park} == {"vin"}
    todo_after, headline_after, park_after = runs.after
    assert todo_after == todo  # the same vehicles, campaigns and reasons in todo.csv
    assert (headline_after["vehicles_to_park"], headline_after["likely_to_park"]) == (len(TO_PARK), 0)
    assert park_after == park  # still confirmed for the VIN, still open


def test_only_an_answer_for_the_vin_closes_a_confirmed_campaign(runs):
    with open_database(runs.db) as store:
        closed = store.sql("SELECT count(*) FROM changes WHERE run_id = $run AND kind = 'closed_recall'",
                           {"run": runs.cheaper["run_id"]}).item()
        checks = store.sql("SELECT count(*) FROM recall_checks WHERE run_id = $run AND checked_via = 'model'",
                           {"run": runs.cheaper["run_id"]}).item()
    assert checks >= len(TO_PARK) and closed == 0
