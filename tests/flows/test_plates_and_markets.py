"""Call only what can answer: vehicles from abroad skip the North American datasets; plates find their VINs."""

from __future__ import annotations

import json

import polars as pl
import pytest

from fleet_data.connectors.sandbox import plates as sandbox_plates
from fleet_data.flows.cli import main
from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import RefreshOptions

from .conftest import sample_rows

pytestmark = pytest.mark.usefixtures("prefect_server")

ABROAD = "WBA3A5C50DF123456"  # the sandbox's international example: /specs answers through its fallback
US_ONLY = {"/history": "history", "/v1/lien-theft": "lien_theft", "/v2/marketvalue": "market_value"}


def sandbox_plate(found: bool, state: str = "TX", start: int = 0) -> str:
    for i in range(start, start + 500):
        if (sandbox_plates.lookup("US", state, f"P{i:04d}") is not None) == found:
            return f"P{i:04d}"
    raise AssertionError("unreachable")


KNOWN, UNKNOWN = sandbox_plate(True), sandbox_plate(False)


def write_fleet(tmp_path, vins: int = 6) -> tuple[str, list[str]]:
    """`vins` clean US rows, a vehicle from abroad, and rows with a plate instead of a VIN."""
    rows = sample_rows(vins).select("vin", "plate", "state").with_columns(pl.lit(None, pl.String).alias("country"))
    extra = pl.DataFrame(
        [
            {"vin": ABROAD, "plate": "M AB 123", "state": None, "country": "DE"},
            {"vin": None, "plate": KNOWN, "state": "TX", "country": None},
            {"vin": None, "plate": KNOWN.lower(), "state": "tx", "country": None},  # the same vehicle twice
            {"vin": None, "plate": UNKNOWN, "state": "TX", "country": None},
            {"vin": None, "plate": "NOSTATE1", "state": None, "country": None},
        ],
        schema=rows.schema,
    )
    path = tmp_path / "fleet.csv"
    pl.concat([rows, extra]).write_csv(path)
    return str(path), rows["vin"].str.to_uppercase().to_list()


def run(fleet, db, **kw):
    kw.setdefault("lake", None)
    kw.setdefault("chunk_size", 16)
    return refresh_fleet([fleet], RefreshOptions(db=db, **kw))


def test_abroad_is_not_applicable_and_plates_join_the_roster_once(service, tmp_path, db_path, read):
    sandbox = service()
    fleet, us_vins = write_fleet(tmp_path)
    plate_vin = sandbox_plates.lookup("US", "TX", KNOWN)["vin"]

    planned = run(fleet, db_path, dry_run=True)
    assert sandbox.count() == 0  # the plan, plate lookups priced in, before any call
    assert planned["plates"]["lookups"] == 2 and planned["plates"]["estimated_units"] == 2
    assert planned["estimated_units"] == 2 + 7 + 3 * 6 + 6  # plates, specs (7), three US-only, recalls (6)
    assert {d: planned["datasets"][d]["not_applicable"] for d in planned["datasets"]} == {
        "specs": 0, "market_value": 1, "history": 1, "lien_theft": 1, "recalls": 1}

    done = run(fleet, db_path)
    assert done["status"] == "completed", done
    # The vehicle from abroad was never sent to a US-only service, nor to the recall batch.
    for endpoint, dataset in US_ONLY.items():
        assert sandbox.count(endpoint) == done["datasets"][dataset]["planned"] == 7  # 6 from the file, 1 by plate
        assert done["datasets"][dataset]["not_applicable"] == 1
    assert done["datasets"]["recalls"]["not_applicable"] == 1
    assert sandbox.units(sandbox_key(), "recalls") == 7 + done["recall_details"]["units"]  # 1 per VIN in the batch
    assert read(db_path, f"SELECT endpoint FROM api_calls WHERE vin = '{ABROAD}'") == [("/specs",)]
    assert read(db_path, f"SELECT dataset, outcome FROM fetch_status WHERE vin = '{ABROAD}'") == [("specs", "found")]
    assert read(db_path, f"SELECT count(*) FROM failures WHERE vin = '{ABROAD}'") == [(0,)]
    assert read(db_path, f"SELECT is_international, make FROM specs WHERE vin = '{ABROAD}'") == [(True, "BMW")]
    assert read(db_path, f"SELECT dataset, not_applicable FROM run_datasets WHERE run_id = '{done['run_id']}' AND dataset <> 'recall_details' "
                         "ORDER BY dataset") == [("history", 1), ("lien_theft", 1), ("market_value", 1),
                                                 ("recalls", 1), ("specs", 0)]

    # Plates: one call per plate, the VIN found joins the roster once, the others are rejects with a reason.
    assert sandbox.count("/v2/platedecoder") == 2
    assert read(db_path, "SELECT vin, vin_source, plate, duplicate_count FROM vehicles WHERE vin_source = 'plate'") == [
        (plate_vin, "plate", KNOWN, 1)]
    assert read(db_path, "SELECT count(*) FROM vehicles WHERE vin_source = 'file'") == [(7,)]
    assert read(db_path, "SELECT plate, state, country, vin, outcome, run_id FROM plate_resolutions ORDER BY outcome") == [
        (KNOWN, "TX", "US", plate_vin, "found", done["run_id"]), (UNKNOWN, "TX", "US", None, "not_found", done["run_id"])]
    assert read(db_path, "SELECT source_row, reason FROM rejected_rows WHERE run_id = "
                         f"'{done['run_id']}' ORDER BY source_row") == [(10, "plate_not_found"), (11, "plate_needs_state")]
    ingest = done["ingest"]
    assert (ingest["rows_in"], ingest["valid"], ingest["duplicates"], ingest["rejected"]) == (11, 8, 1, 2)
    assert ingest["rows_in"] == ingest["valid"] + ingest["duplicates"] + ingest["rejected"]
    assert read(db_path, "SELECT endpoint, units FROM api_calls WHERE endpoint = '/v2/platedecoder' ORDER BY units") == [
        ("/v2/platedecoder", 0), ("/v2/platedecoder", 1)]  # counted like every call; the 404 cost nothing
    assert done["plates"]["found"] == 1 and done["plates"]["not_found"] == 1 and done["plates"]["units"] == 1

    before = sandbox.count()
    again = run(fleet, db_path)
    assert sandbox.count() == before  # no plate asked again, every answer still fresh
    assert again["plates"]["known"] == 2 and again["plates"]["calls"] == 0
    assert read(db_path, f"SELECT vin_source, run_id FROM vehicles WHERE vin = '{plate_vin}'") == [("plate", again["run_id"])]
    assert read(db_path, f"SELECT count(*) FROM rejected_rows WHERE run_id = '{again['run_id']}'") == [(2,)]


def sandbox_key() -> str:
    import os

    return os.environ["VDS_API_KEY"]


def test_no_plates_and_a_budget_below_the_plate_cost_call_nothing(service, tmp_path, db_path, read, capsys):
    sandbox = service()
    fleet, _ = write_fleet(tmp_path, vins=2)
    code = main(["refresh", fleet, "--db", db_path, "--lake", "", "--json", "--no-plates", "--datasets", "specs"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)
    assert sandbox.count("/v2/platedecoder") == 0
    assert summary["plates"]["lookups"] == 0
    assert read(db_path, "SELECT reason, count(*) FROM rejected_rows GROUP BY ALL") == [("plate_lookup_off", 4)]

    before = sandbox.count()
    refused = run(fleet, db_path, datasets=["specs"], max_units=1)  # 2 plates cost 2 units, before any dataset
    assert refused["status"] == "refused" and "more than --max-units 1" in refused["message"]
    assert sandbox.count() == before  # refused before any call, plates included
    assert read(db_path, f"SELECT reason, count(*) FROM rejected_rows WHERE run_id = '{refused['run_id']}' "
                         "GROUP BY ALL ORDER BY ALL") == [("plate_needs_state", 1), ("plate_not_looked_up", 3)]
