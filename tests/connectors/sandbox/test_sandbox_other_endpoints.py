"""Plates, ownership, year/make/model options, images, recognition, OBD, openapi.yaml."""
from __future__ import annotations

import pytest

from .sandbox_http import KEY, VIN, assert_error, get

MISSING_PLATE = "Missing vehicle registration number or license plate number"
NO_PLATE = "Plate searches for this country have been disabled, or No data found for this plate"


def _plate_with_data(http, **params) -> str:
    for i in range(40):
        if get(http, "/v2/platedecoder", plate=f"TST{i:03d}", **params).status_code == 200:
            return f"TST{i:03d}"
    raise AssertionError("no plate with data in 40 tries")


def test_plate_v2_single_object_agrees_with_specs(http):
    plate = _plate_with_data(http, country="US", state="CA")
    body = get(http, "/v2/platedecoder", plate=plate, country="US", state="CA").json()
    assert body["input"] == {"plate": plate, "state": "CA", "country": "US"}
    specs = get(http, "/specs", vin=body["vin"]).json()["attributes"]
    assert (body["make"], body["model"], body["year"]) == (specs["make"], specs["model"], specs["year"])


def test_plate_v2_errors(http):
    assert_error(get(http, "/v2/platedecoder", country="US", state="CA"), 400, MISSING_PLATE)
    assert_error(get(http, "/v2/platedecoder", plate="ABC123", country="XX"), 404, "Invalid state or country code.")
    assert_error(get(http, "/v2/platedecoder", plate="ABC123", country="US", state="ZZ"), 404,
                 "Invalid state or country code.")
    assert_error(get(http, "/v2/platedecoder", plate="ABC123", country="AU"), 400, "Missing 2 letter state code")
    assert get(http, "/v2/platedecoder", plate="ABC123", country="AU", state="NSW").status_code in (200, 404)


def test_plate_v2_us_fanout_bills_per_hit_and_nothing_on_no_match(sandbox, http):
    sandbox.reset_stats()
    hits = misses = 0
    for i in range(30):
        response = get(http, "/v2/platedecoder", key="fanout", plate=f"FAN{i:03d}", country="US")
        if response.status_code == 200:
            body = response.json()
            assert body["count"] == len(body["results"]) == body["billed_credits"] >= 1
            hits += body["billed_credits"]
        else:
            assert_error(response, 404, NO_PLATE)
            misses += 1
    assert hits and misses
    assert sandbox.units("fanout", "plate-decoder") == hits


def test_plate_v2_spain_require_vin_bills_twice(sandbox, http):
    plate = _plate_with_data(http, country="ES")
    sandbox.reset_stats()
    get(http, "/v2/platedecoder", key="es", plate=plate, country="ES", require_vin="true")
    get(http, "/v2/platedecoder", key="es", plate=plate, country="ES")
    assert sandbox.units("es", "plate-decoder") == 3


def test_us_plate_decoder_costs_five_plus_specs(sandbox, http):
    plate = _plate_with_data(http, country="US", state="TX")
    sandbox.reset_stats()
    plain = get(http, "/v1/us-platedecoder", key="us", plate=plate, state="TX").json()
    assert "vehicle_specs" not in plain and plain["input"] == {"plate": plate, "state": "TX"}
    decoded = get(http, "/v1/us-platedecoder", key="us", plate=plate, state="TX", decodeVIN="true").json()
    assert decoded["vehicle_specs"]["attributes"]["make"] == decoded["make"]
    assert sandbox.units("us", "plate-decoder") == 10 and sandbox.units("us", "specs") == 1
    assert_error(get(http, "/v1/us-platedecoder", state="TX"), 400, MISSING_PLATE)
    assert_error(get(http, "/v1/us-platedecoder", plate=plate), 400, "Missing 2 letter state code")


def test_legacy_plate_decoder_flat_fields(http):
    plate = _plate_with_data(http, country="US", state="NY")
    body = get(http, "/platedecoder", plate=plate, state="NY").json()
    assert {"Description", "CarMake", "CarModel", "RegistrationYear", "VIN"} <= set(body)
    assert get(http, "/platedecoder", plate=plate, state="NY", format="xml").text.startswith("<?xml")
    assert_error(get(http, "/platedecoder", state="NY"), 400, MISSING_PLATE)


def test_ownership_by_vin(sandbox, http):
    sandbox.reset_stats()
    body = get(http, "/v1/ownership/vin", key="test_enterprise", vin=VIN).json()
    assert body["success"] and body["error"] == "" and body["owners"]
    assert isinstance(body["vehicle"]["year"], int)
    assert sandbox.units("test_enterprise", "ownership") == len(body["owners"])
    narrowed = get(http, "/v1/ownership/vin", key="test_enterprise", vin=VIN, include="emails").json()
    assert "emails" in narrowed["owners"][0] and "phones" not in narrowed["owners"][0]
    assert narrowed["owners"][0]["record_id"] == body["owners"][0]["record_id"]


@pytest.mark.parametrize("key,vin,status,error,message", [
    ("test_enterprise", "SHORT", 400, "invalid_vin", "Wrong VIN length, must be 17 characters"),
    (None, VIN, 401, "unauthorized", "Missing API key"),
    (KEY, VIN, 403, "api_not_enabled", "The Ownership API is not enabled for this API key."),
    ("test_enterprise", "1HGCM82633A000404", 404, "no_data", "No ownership record exists for this VIN."),
    ("test_enterprise", "1HGCM82633A000503", 503, "unavailable", "The Ownership API is temporarily unavailable."),
])
def test_ownership_errors_carry_vin_and_empty_owners(http, key, vin, status, error, message):
    body = assert_error(get(http, "/v1/ownership/vin", key=key, vin=vin), status, message)
    assert body["owners"] == [] and body["error"] == error and body["vin"] == vin


def test_ownership_by_phone_single_and_bulk(sandbox, http):
    phones = [f"512555{i:04d}" for i in range(30)]
    found = [p for p in phones if get(http, "/v1/ownership/phone", key="test_enterprise", phone=p).status_code == 200]
    assert 0 < len(found) < len(phones)
    sandbox.reset_stats()
    bulk = http.post("/v1/ownership/phone/bulk", params={"key": "test_enterprise"}, json={"phones": phones})
    body = bulk.json()
    assert [m["phone"] for m in body["matches"]] == found and body["count"] == len(found)
    assert sandbox.units("test_enterprise", "ownership-phone") == len(found)
    missing = [p for p in phones if p not in found][:3]
    none = http.post("/v1/ownership/phone/bulk", params={"key": "test_enterprise"}, json={"phones": missing})
    assert_error(none, 404, "No ownership record exists for these phone numbers.")
    too_many = http.post("/v1/ownership/phone/bulk", params={"key": "test_enterprise"},
                         json={"phones": ["5125550000"] * 101})
    assert_error(too_many, 400, "A bulk request accepts at most 100 phone numbers")
    assert_error(get(http, "/v1/ownership/phone", key="test_enterprise", phone="12"), 400,
                 "Invalid phone number. Must be a 10-digit US number")
    assert sandbox.units("test_enterprise", "ownership-phone") == len(found)


def test_ymm_options_layers(http):
    assert "2026" in get(http, "/v1/ymm-options").json()["years"]
    assert "Toyota" in get(http, "/v1/ymm-options", year="2020").json()["makes"]
    models = get(http, "/v1/ymm-options", dimension="models", make="toyota").json()
    assert "Camry" in models["models"] and models["input"] == {"make": "toyota"}
    trims = get(http, "/v1/ymm-options", dimension="trims", make="Toyota", model="Camry", trim="x").json()
    assert trims["trims"] == ["XLE", "XSE"]
    years = get(http, "/v1/ymm-options", make="Tesla", model="Model 3").json()  # reversed lookup
    assert years["years"][-1] == "2017"


def test_ymm_variants_per_model_billing(sandbox, http):
    sandbox.reset_stats()
    body = get(http, "/v1/ymm-options", key="ymm", dimension="variants", year="2020", make="Toyota").json()
    assert body["modelCount"] == 5 and body["variants"]
    get(http, "/v1/ymm-options", key="ymm", dimension="variants", make="Toyota", model="Camry")
    assert sandbox.units("ymm", "ymm-options") == 6


@pytest.mark.parametrize("params,message", [
    ({"dimension": "colors"}, "Invalid dimension. Must be one of: years, makes, models, trims, variants."),
    ({"model": "Camry"}, "The year parameter is required when filtering by model without make."),
    ({"dimension": "models"}, "The make parameter is required for dimension=models."),
    ({"dimension": "trims", "make": "Toyota"}, "The model parameter is required for dimension=trims."),
    ({"dimension": "variants", "make": "Toyota"},
     "The model parameter is required for dimension=variants unless both year and make are set."),
])
def test_ymm_options_rules(http, params, message):
    assert_error(get(http, "/v1/ymm-options", **params), 400, message)


def test_images(http):
    body = get(http, "/images", make="Toyota", model="Camry", angle="front").json()
    assert body["images"] and body["query"]["format"] == "json" and "key" not in body["query"]
    assert all(i["link"].startswith("https://") for i in body["images"])
    assert_error(get(http, "/images", make="Toyota"), 500, "Please supply a make and model...")
    assert_error(get(http, "/images", make="Nomake", model="X"), 404, "No images found")
    assert get(http, "/images", make="Toyota", model="Camry", angle="top").status_code == 400
    assert get(http, "/images", make="Toyota", model="Camry", photoType="interior").status_code == 400


def test_plate_recognition_and_vin_ocr(http):
    for path in ("/platerecognition", "/v1/vinocr"):
        assert_error(http.post(path, params={"key": KEY}, json={}), 400, "Missing image data")
        assert_error(http.post(path, params={"key": KEY}, json={"image": "not an image!"}), 400,
                     "Invalid image data format. Must be a valid URL or base64 encoded string.")
    outcomes = {http.post("/v1/vinocr", params={"key": KEY},
                          json={"image": f"https://example.com/{i}.jpg"}).json().get("message", "ok")
                for i in range(40)}
    assert outcomes == {"ok", "No valid VIN candidates found in the image", "No text detected in the image"}
    plates = {http.post("/platerecognition", params={"key": KEY},
                        json={"image": f"https://example.com/{i}.jpg"}).json().get("message", "ok")
              for i in range(40)}
    assert plates == {"ok", "No plates detected in image"}


def test_obd(http):
    body = get(http, "/obdcodesdecoder", code="p0420").json()
    assert body["code"] == "P0420" and "Catalyst" in body["diagnosis"]
    assert_error(get(http, "/obdcodesdecoder", code="P99999"), 404, "Could not find code P99999")
    assert_error(get(http, "/obdcodesdecoder"), 400, "Missing code parameter")


def test_openapi_served_when_present_and_404_otherwise(tmp_path):
    from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox
    import httpx
    document = tmp_path / "openapi.yaml"
    document.write_text("openapi: 3.1.0\n")
    with run_sandbox(SandboxConfig(openapi_path=document)) as sb:
        assert httpx.get(sb.url + "/openapi.yaml", trust_env=False).text == "openapi: 3.1.0\n"
    with run_sandbox(SandboxConfig(openapi_path=tmp_path / "absent.yaml")) as sb:
        assert httpx.get(sb.url + "/openapi.yaml", trust_env=False).status_code == 404
        assert sb.stats()["total"] == 0  # neither counted


def test_unknown_path_and_method(http):
    assert get(http, "/v3/nothing").status_code == 404
    assert http.delete("/specs", params={"key": KEY}).status_code == 405
