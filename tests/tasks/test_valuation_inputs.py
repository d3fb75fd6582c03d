"""What a valuation is asked with: the fleet file's condition and mileage unit, and a state only
where the spec allows one (a US state; a Canadian province is not one)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.datasets import mileage_unit_unknown
from fleet_data.tasks.fetch.enrich import fetch_chunk, valuation_request
from fleet_data.tasks.ingest.fleet_files import read_fleet
from fleet_data.tasks.land.landing import land_enrichment

TX, ON, CA, BC, NY = "1FTFW1E50KF000001", "1FTFW1E52KF000002", "1FTFW1E54KF000003", "1FTFW1E56KF000004", "1FTFW1E58KF000005"


def write(tmp_path: Path, text: str, name: str = "fleet.csv") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("header", ["condition", "vehicle_condition", "Condition", "Vehicle Condition", "grade"])
def test_the_condition_column_is_read_under_its_usual_names(tmp_path, header):
    fleet = read_fleet(write(tmp_path, f"vin,{header}\n{TX}, Excellent \n{ON},ROUGH\n{CA},average\n{BC},\n"))
    rows = fleet.roster.select("vin", "condition", "condition_rejected").rows()
    assert rows == [(TX, "excellent", None), (ON, "rough", None), (CA, "average", None), (BC, None, None)]


def test_a_condition_the_spec_does_not_know_is_rejected_and_the_vehicle_kept(tmp_path):
    # A condition only shapes the valuation: the vehicle still gets its recalls, specs and history.
    fleet = read_fleet(write(tmp_path, f"vin,condition\n{TX},mint\n{ON},C lean\n{CA},good\n"))
    rows = fleet.roster.select("vin", "condition", "condition_rejected").rows()
    assert rows == [(TX, None, "mint"), (ON, "clean", None), (CA, None, "good")]
    assert (fleet.rows_in, fleet.valid, fleet.rejected_count) == (3, 3, 0)


def test_the_mileage_unit_comes_from_the_header_or_the_cell(tmp_path):
    km_header = read_fleet(write(tmp_path, f"vin,odometer_km\n{TX},\"100,000\"\n{ON},\n", "a.csv"))
    assert km_header.roster.select("vin", "mileage", "mileage_unit").rows() == [(TX, 100000, "km"), (ON, None, None)]
    cells = read_fleet(write(tmp_path, f"vin,mileage\n{TX},12 345 KM\n{ON},40000\n{CA},52000 miles\n", "b.csv"))
    # A plain number says no unit: unknown (NULL), decided by the vehicle's market when it is valued.
    assert cells.roster.select("mileage", "mileage_unit").rows() == [(12345, "km"), (40000, None), (52000, "mi")]
    for header in ("mileage_km", "Odometer (km)", "kilometrage"):
        read = read_fleet(write(tmp_path, f"vin,{header}\n{TX},7\n", "c.csv"))
        assert read.roster.select("mileage", "mileage_unit").rows() == [(7, "km")], header


@pytest.mark.parametrize(("row", "asked"), [
    ({"state": "TX", "mileage": 100000, "mileage_unit": "km", "condition": "excellent", "mileage_source": "fleet_file"},
     {"state": "TX", "mileage": 62137, "mileage_unit": "mi", "condition": "excellent", "mileage_source": "fleet_file",
      "country": "US"}),
    ({"state": "DC", "mileage": 40000, "mileage_unit": "mi", "condition": None, "mileage_source": "history"},
     {"state": "DC", "mileage": 40000, "mileage_unit": "mi", "condition": None, "mileage_source": "history",
      "country": "US"}),
    ({"state": "ON", "mileage": 50000, "mileage_unit": "km", "condition": "rough"},  # Canada: km as given, no state
     {"state": None, "mileage": 50000, "mileage_unit": "km", "condition": "rough", "mileage_source": None,
      "country": "CA"}),
    ({"state": "QC", "mileage": 10000, "mileage_unit": "mi", "condition": None},
     {"state": None, "mileage": 16093, "mileage_unit": "km", "condition": None, "mileage_source": None, "country": "CA"}),
    ({"state": "NSW", "mileage": None, "mileage_unit": None, "condition": "clean"},  # not a US state: not sent
     {"state": None, "mileage": None, "mileage_unit": None, "condition": "clean", "mileage_source": None,
      "country": None}),
    ({"state": None, "mileage": 30000, "mileage_unit": None, "condition": None},  # no unit said, not Canadian: miles
     {"state": None, "mileage": 30000, "mileage_unit": "mi", "condition": None, "mileage_source": None,
      "country": None}),
    # Issue 26: a Canadian vehicle whose file says no unit: neither taken as miles nor converted, not sent.
    ({"state": "ON", "mileage": 147702, "mileage_unit": None, "condition": None, "mileage_source": "fleet_file"},
     {"state": None, "mileage": None, "mileage_unit": None, "condition": None, "mileage_source": None, "country": "CA"}),
    ({"state": None, "market": "CA", "mileage": 80000, "mileage_unit": None, "condition": None},  # country column CA
     {"state": None, "mileage": None, "mileage_unit": None, "condition": None, "mileage_source": None, "country": "CA"}),
    ({"state": None, "market": "CA", "mileage": 80000, "mileage_unit": "mi", "condition": None},
     {"state": None, "mileage": 128748, "mileage_unit": "km", "condition": None, "mileage_source": None,
      "country": "CA"}),
])
def test_what_a_valuation_is_asked_with(row, asked):
    assert valuation_request({"vin": TX, **row}) == asked
    assert mileage_unit_unknown(row) == (row["mileage"] is not None and asked["mileage"] is None)


def test_valuations_are_asked_with_the_files_inputs(tmp_path, store, sandbox, settings):
    text = (f"vin,state,odometer_km,Condition\n{TX},TX,100000,Excellent\n{ON},ON,50000,rough\n"
            f"{CA},ca,30000,mint\n{BC},BC,,\n{NY},NY,,clean\n")
    fleet = read_fleet(write(tmp_path, text))
    store.land("vehicles", fleet.roster, "r1")
    rows = store.query("due_vins", run_id="r1", dataset="market_value", force=True, fresh_after=None,
                       no_data_after=None, future_after=None, service=None).to_dicts()
    result = asyncio.run(fetch_chunk("market_value", rows, calls=Calls(settings=settings())))
    assert len(result.found) == 5
    land_enrichment(store, "r1", result)
    valued = store.sql("SELECT vin, state, mileage, mileage_unit, condition FROM market_values ORDER BY vin").rows()
    assert sorted(valued) == sorted([
        (TX, "TX", 62137, "mi", "excellent"),  # km in the file, miles for a US vehicle
        (ON, None, 50000, "km", "rough"),  # Canada: kilometres as given, and no province sent as a state
        (CA, "CA", 18641, "mi", None),  # a rejected condition is not sent
        (BC, None, None, None, None),
        (NY, "NY", None, None, "clean"),
    ])
    # What the service itself says it was asked (its echo of the request).
    echoed = dict(store.sql("SELECT vin, body->'input'->>'state' FROM raw_responses").rows())
    assert echoed[ON] == "" and echoed[BC] == "" and echoed[TX] == "TX"
    assert store.sql("SELECT condition_rejected FROM vehicles WHERE vin = $v", {"v": CA}).item() == "mint"
    asked = json.loads(store.sql("SELECT request_params FROM raw_responses WHERE vin = $v", {"v": ON}).item())
    assert asked["mileage"] == 50000 and asked["mileage_unit"] == "km" and asked.get("state") is None
