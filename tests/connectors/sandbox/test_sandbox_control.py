"""Telling a running sandbox (a separate process) that a vehicle changed: recalls, value, title, liens, decode."""
from __future__ import annotations

import time

import httpx
import pytest

from fleet_data.connectors.sandbox import Sandbox

from .sandbox_http import KEY, VIN, VIN_NO_RECALLS, get

PARK_IT = {"nhtsa_campaign_number": "26V999000", "component": "AIR BAGS", "park_it": True,
           "summary": "The driver air bag inflator may rupture."}


@pytest.fixture(scope="module")
def child():
    sandbox = Sandbox.start_subprocess()
    try:
        yield sandbox
    finally:
        sandbox.stop()


@pytest.fixture
def http(child):
    with httpx.Client(base_url=child.url, timeout=10, trust_env=False) as client:
        yield client
    child.clear_vehicles()


def answers(http: httpx.Client, vin: str) -> dict:
    return {
        "recalls": get(http, "/v1/recalls", vin=vin).json()["data"]["recalls"],
        "retail": get(http, "/v2/marketvalue", vin=vin).json()["retail"],
        "history": get(http, "/history", vin=vin).json(),
        "lien_theft": get(http, "/v1/lien-theft", vin=vin),
        "specs": get(http, "/specs", vin=vin).json()["attributes"],
    }


def batch_count(http: httpx.Client, vin: str) -> int:
    submitted = http.post("/v1/recalls-batch/submit", params={"key": KEY}, json={"vins": [vin]}).json()
    batch_id = submitted["data"]["batchId"]
    for _ in range(200):  # bounded: a one-VIN batch completes within a tick or two
        answer = get(http, "/v1/recalls-batch/results", batchId=batch_id)
        if answer.status_code == 200:
            return answer.json()["data"]["results"][0]["recallCount"]
        time.sleep(0.05)
    raise AssertionError("the batch never completed")


def test_a_vehicle_told_to_change_answers_so_on_every_endpoint(child, http):
    before = answers(http, VIN)
    kept = before["recalls"][1:]
    assert before["recalls"] and before["lien_theft"].status_code == 200

    child.set_vehicle(VIN, recalls=[*kept, PARK_IT], value_factor=1.25, title_brands=["Salvage"],
                      lien_theft=[{"event": "Theft", "location": "TX", "details_list": ["Date: 2026-11-02"]}],
                      specs={"trim": "Sport"},
                      history={"historyInformation": [{"date": "2026-01-02", "odometer": 9000}]})
    after = answers(http, VIN)

    numbers = [c["nhtsa_campaign_number"] for c in after["recalls"]]
    assert numbers == [c["nhtsa_campaign_number"] for c in kept] + ["26V999000"]
    park_it = after["recalls"][-1]
    assert park_it["park_it"] is True and park_it["component"] == "AIR BAGS"
    assert park_it["manufacturer"]  # the fields not given are filled in, as a real campaign has them
    assert batch_count(http, VIN) == len(kept) + 1  # the batch agrees with the per-VIN lookup
    assert abs(after["retail"] / before["retail"] - 1.25) < 0.01
    assert [b["brand_name"] for b in after["history"]["brandsInformation"]] == ["Salvage"]
    assert after["history"]["brandsRecordCount"] == 1
    assert after["history"]["historyInformation"] == [{"date": "2026-01-02", "odometer": 9000}]
    assert after["lien_theft"].json()["events"] == [{"event": "Theft", "location": "TX", "details_list": ["Date: 2026-11-02"]}]
    assert after["specs"]["trim"] == "Sport" and after["specs"]["make"] == before["specs"]["make"]
    assert child.vehicle(VIN)["value_factor"] == 1.25

    # Only that VIN changed; clearing it brings the generated answers back.
    assert answers(http, VIN_NO_RECALLS)["recalls"] == []
    child.clear_vehicles(VIN)
    assert answers(http, VIN)["recalls"] == before["recalls"]
    assert child.vehicle(VIN) == {}


def test_no_recalls_and_no_lien_theft_data_can_be_told_too(child, http):
    child.set_vehicle(VIN, recalls=[], lien_theft=None)
    assert get(http, "/v1/recalls", vin=VIN).json()["data"]["recall_count"] == 0
    assert batch_count(http, VIN) == 0
    gone = get(http, "/v1/lien-theft", vin=VIN)
    assert gone.status_code == 404 and gone.json()["message"] == "No lien or theft data found for this VIN"


def test_a_later_call_changes_only_what_it_names(child, http):
    child.set_vehicle(VIN, value_factor=0.5)
    child.set_vehicle(VIN, title_brands=["Flood Damage"])
    assert child.vehicle(VIN) == {"value_factor": 0.5, "title_brands": ["Flood Damage"]}


@pytest.mark.parametrize("body, message", [
    ({"colour": "red"}, "unknown override 'colour'"),
    ({"value_factor": -1}, "value_factor must be a positive number"),
    ({"recalls": [{"component": "AIR BAGS"}]}, "each recall needs an nhtsa_campaign_number"),
    ({"title_brands": "Salvage"}, "title_brands must be a list of brand names"),
])
def test_a_bad_override_is_refused_in_one_line(child, http, body, message):
    answer = http.post(f"/_sandbox/vehicles/{VIN}", json=body)
    assert answer.status_code == 400
    assert message in answer.json()["message"] and "\n" not in answer.json()["message"]
    assert child.vehicle(VIN) == {}


def test_overrides_can_be_given_at_start(tmp_path):
    import json

    path = tmp_path / "vehicles.json"
    path.write_text(json.dumps({VIN: {"recalls": [PARK_IT]}}))
    sandbox = Sandbox.start_subprocess(["--vehicles", str(path)])
    try:
        with httpx.Client(base_url=sandbox.url, timeout=10, trust_env=False) as client:
            listed = get(client, "/v1/recalls", vin=VIN).json()["data"]["recalls"]
        assert [c["nhtsa_campaign_number"] for c in listed] == ["26V999000"]
    finally:
        sandbox.stop()
