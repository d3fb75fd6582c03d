"""Products the vendor's SDKs call and the spec does not describe: `/v1/ymm` and ownership by
person, by address and by ZIP (enterprise only, like ownership by VIN)."""
from __future__ import annotations

import pytest

from .sandbox_http import KEY, assert_error, get

ENTERPRISE = "test_enterprise"
NOT_ENABLED = "The Ownership API is not enabled for this API key."
PERSON = {"first_name": "John", "last_name": "Sample", "address": "123 Example St", "zip": "90210"}  # SDK README
ADDRESS = {"address": "123 Example St", "zip": "90210"}
OWNER_SECTIONS = {"demographics", "emails", "phones", "vehicle_history"}


# --- /v1/ymm ------------------------------------------------------------------------------------

def test_ymm_best_match_and_trim_options(sandbox, http):
    sandbox.reset_stats()
    body = get(http, "/v1/ymm", key="ymm-key", year="2012", make="BMW", model="5 Series").json()
    assert body["success"] is True and body["input"] == {"year": "2012", "make": "BMW", "model": "5 Series"}
    best = body["bestMatch"]
    assert (best["make"], best["model"], best["year"]) == ("BMW", "5 Series", 2012)
    assert best["name"].startswith("2012 BMW 5 Series") and best["base_msrp"] > 0
    assert {"exterior", "interior"} == set(best["color"]) and best["features"]["standard"]
    assert [t["name"] for t in body["trimOptions"]] == ["530i", "540i xDrive", "M550i"]
    assert sandbox.units("ymm-key", "ymm") == 1


def test_ymm_trim_picks_the_best_match(http):
    body = get(http, "/v1/ymm", year="2023", make="toyota", model="camry", trim="xse").json()
    assert body["bestMatch"]["trim"] == "XSE" and body["input"]["trim"] == "xse"


@pytest.mark.parametrize("params", [{"make": "BMW", "model": "5 Series"}, {"year": "2012", "model": "5 Series"},
                                    {"year": "2012", "make": "BMW"}, {"year": "12", "make": "BMW", "model": "X5"}])
def test_ymm_missing_parameters(http, params):
    assert_error(get(http, "/v1/ymm", **params), 400, "Missing required parameters")


@pytest.mark.parametrize("params", [{"year": "2012", "make": "Nomake", "model": "X"},
                                    {"year": "1990", "make": "Tesla", "model": "Model 3"}])
def test_ymm_unknown_vehicle_is_not_found_and_free(sandbox, http, params):
    sandbox.reset_stats()
    assert_error(get(http, "/v1/ymm", key="ymm-404", **params), 404, "No data found for this year, make and model")
    assert sandbox.units("ymm-404", "ymm") == 0


# --- ownership by person / address / ZIP ---------------------------------------------------------

@pytest.mark.parametrize(("path", "params"), [("/v1/ownership/person", PERSON), ("/v1/ownership/address", ADDRESS),
                                              ("/v1/ownership/zip", {"zip": "90210"})])
def test_ownership_searches_are_enterprise_only(http, path, params):
    body = assert_error(get(http, path, **params), 403, NOT_ENABLED)
    assert body["error"] == "api_not_enabled" and body["owners"] == []
    assert_error(get(http, path, key=None, **params), 401, "Missing API key")


def test_ownership_by_person(sandbox, http):
    sandbox.reset_stats()
    body = get(http, "/v1/ownership/person", key=ENTERPRISE, **PERSON).json()
    assert body["success"] is True and body["error"] == "" and body["input"] == PERSON
    assert body["count"] == len(body["matches"]) >= 1
    person = body["matches"][0]
    assert (person["first_name"], person["last_name"]) == ("John", "Sample")
    assert person["address"]["street"] == "123 Example St" and person["address"]["zip"] == "90210"
    assert OWNER_SECTIONS <= set(person) and person["vehicle_history"][0]["vin"]
    assert sandbox.units(ENTERPRISE, "ownership") == body["count"]
    again = get(http, "/v1/ownership/person", key=ENTERPRISE, **PERSON).json()
    assert again["matches"] == body["matches"]


def test_ownership_by_person_no_match_is_404_no_data_and_free(sandbox, http):
    sandbox.reset_stats()
    outcomes = [get(http, "/v1/ownership/person", key=ENTERPRISE, first_name="Ann", last_name=f"Doe{i}",
                    address="1 Main St", zip="10001") for i in range(30)]
    misses = [r for r in outcomes if r.status_code == 404]
    assert misses and len(misses) < len(outcomes)
    body = assert_error(misses[0], 404, "No ownership record matches this person.")
    assert body["error"] == "no_data"
    assert sandbox.units(ENTERPRISE, "ownership") == sum(r.json()["count"] for r in outcomes if r.status_code == 200)


@pytest.mark.parametrize(("params", "error", "message"), [
    ({**PERSON, "first_name": ""}, "invalid_input", "Missing required parameters: first_name, last_name, address, zip"),
    ({k: v for k, v in PERSON.items() if k != "zip"}, "invalid_input",
     "Missing required parameters: first_name, last_name, address, zip"),
    ({**PERSON, "zip": "9021"}, "invalid_zip", "Invalid ZIP code. Must be a 5-digit US ZIP, optionally ZIP+4"),
    ({**PERSON, "address": "x" * 101}, "invalid_input",
     "first_name and last_name take at most 50 characters, address at most 100"),
])
def test_ownership_by_person_validation(http, params, error, message):
    assert assert_error(get(http, "/v1/ownership/person", key=ENTERPRISE, **params), 400, message)["error"] == error


@pytest.mark.parametrize("narrow", ["include", "variant"])
def test_ownership_include_and_its_legacy_alias_variant(http, narrow):
    full = get(http, "/v1/ownership/address", key=ENTERPRISE, **ADDRESS).json()["matches"]
    narrowed = get(http, "/v1/ownership/address", key=ENTERPRISE, **ADDRESS, **{narrow: "emails,phones"}).json()
    assert [set(m) & OWNER_SECTIONS for m in narrowed["matches"]] == [{"emails", "phones"}] * len(full)
    assert [m["record_id"] for m in narrowed["matches"]] == [m["record_id"] for m in full]


def test_ownership_by_address(sandbox, http):
    sandbox.reset_stats()
    body = get(http, "/v1/ownership/address", key=ENTERPRISE, **ADDRESS).json()
    assert body["input"] == ADDRESS and body["count"] == len(body["matches"]) >= 1
    assert all(m["address"]["street"] == "123 Example St" for m in body["matches"])
    assert sandbox.units(ENTERPRISE, "ownership") == body["count"]
    assert_error(get(http, "/v1/ownership/address", key=ENTERPRISE, address="123 Example St"), 400,
                 "Missing required parameters: address, zip")


def test_ownership_by_zip_pages_and_filters(sandbox, http):
    sandbox.reset_stats()
    first = get(http, "/v1/ownership/zip", key=ENTERPRISE, zip="90210", source="npm").json()
    assert first["zip"] == "90210" and first["page"] == 1 and first["limit"] == 15
    assert first["count"] == len(first["records"]) == 15 and first["total"] > 15
    assert all(r["address"]["zip"] == "90210" for r in first["records"])
    second = get(http, "/v1/ownership/zip", key=ENTERPRISE, zip="90210", page="2", limit="15").json()
    assert not {r["record_id"] for r in first["records"]} & {r["record_id"] for r in second["records"]}
    women = get(http, "/v1/ownership/zip", key=ENTERPRISE, zip="90210", gender="F", min_age="45", limit="100").json()
    assert women["filters"] == {"gender": "F", "min_age": 45}
    assert women["records"] and all(r["gender"] == "F" and int(r["age"]) >= 45 for r in women["records"])
    assert sandbox.units(ENTERPRISE, "ownership") == 15 + second["count"] + women["count"]


def test_ownership_by_zip_past_the_last_page_is_no_data(http):
    total = get(http, "/v1/ownership/zip", key=ENTERPRISE, zip="90210").json()["total"]
    past = get(http, "/v1/ownership/zip", key=ENTERPRISE, zip="90210", page=str(total + 1), limit="1")
    assert assert_error(past, 404, "No ownership record matches this ZIP code and these filters.")["error"] == "no_data"


@pytest.mark.parametrize(("params", "error", "message"), [
    ({"zip": "9021"}, "invalid_zip", "Invalid ZIP code. Must be exactly 5 digits"),
    ({"zip": "90210-1234"}, "invalid_zip", "Invalid ZIP code. Must be exactly 5 digits"),
    ({"zip": "90210", "gender": "X"}, "invalid_input", "Invalid gender. Must be M or F"),
    ({"zip": "90210", "min_age": "old"}, "invalid_input", "Invalid min_age. Must be a whole number"),
    ({"zip": "90210", "min_age": "60", "max_age": "30"}, "invalid_input", "min_age must not be greater than max_age"),
    ({"zip": "90210", "page": "0"}, "invalid_input", "Invalid page. Must be a whole number from 1"),
    ({"zip": "90210", "limit": "101"}, "invalid_input", "Invalid limit. Must be a whole number from 1 to 100"),
])
def test_ownership_by_zip_validation(http, params, error, message):
    assert assert_error(get(http, "/v1/ownership/zip", key=ENTERPRISE, **params), 400, message)["error"] == error


def test_ymm_and_ownership_accept_the_sdk_source_parameter(http):
    assert get(http, "/v1/ownership/person", key=ENTERPRISE, source="pip", **PERSON).status_code == 200
    assert get(http, "/v1/ymm", key=KEY, source="npm", year="2020", make="Toyota", model="Camry").status_code == 200
