"""Where the spec says "not shown", the vendor's own SDKs (PyPI `carsxe` 1.4.0, npm `carsxe-api` 1.4.0)
show the real paths, parameters and bodies: the sandbox serves those, and only those."""
from __future__ import annotations

import pytest

from .sandbox_http import KEY, VIN, assert_error, get

IMAGE = "https://api.carsxe.com/img/apis/plate_recognition.JPG"  # the SDK READMEs' example
INVALID_IMAGE = "Invalid image data format. Must be a valid URL or base64 encoded string."


@pytest.mark.parametrize(("old", "new"), [("/v1/plate-recognition", "/platerecognition"),
                                          ("/v1/vin-ocr", "/v1/vinocr")])
def test_image_products_moved_to_the_sdk_paths(http, old, new):
    assert http.post(old, params={"key": KEY}, json={"image": IMAGE}).status_code == 404
    assert http.post(new, params={"key": KEY}, json={"image": IMAGE}).status_code in (200, 404)


@pytest.mark.parametrize("path", ["/platerecognition", "/v1/vinocr"])
def test_image_products_accept_both_sdk_body_spellings(http, path):
    # Python SDK: {"upload_url": ...}; npm SDK: {"image": ...}. Same image, same answer.
    for i in range(12):
        url = f"https://example.com/{i}.jpg"
        by_image = http.post(path, params={"key": KEY}, json={"image": url})
        by_upload = http.post(path, params={"key": KEY, "source": "pip"}, json={"upload_url": url})
        assert by_image.status_code == by_upload.status_code
        assert {**by_image.json(), "timestamp": 0} == {**by_upload.json(), "timestamp": 0}
    assert_error(http.post(path, params={"key": KEY}, json={"upload_url": ""}), 400, "Missing image data")
    assert_error(http.post(path, params={"key": KEY}, json={"upload_url": "not an image!"}), 400, INVALID_IMAGE)


def test_plate_recognition_shape(http):
    body = next(r.json() for i in range(20)
                if (r := http.post("/platerecognition", params={"key": KEY},
                                   json={"image": f"https://example.com/{i}.jpg"})).status_code == 200)
    plate = body["results"][0]
    assert {"plate", "score", "box", "candidates", "region", "vehicle"} <= set(plate)
    assert set(plate["box"]) == {"xmin", "ymin", "xmax", "ymax"}
    assert plate["candidates"][0]["plate"] == plate["plate"]


def test_vin_ocr_shape(http):
    body = next(r.json() for i in range(20)
                if (r := http.post("/v1/vinocr", params={"key": KEY},
                                   json={"image": f"https://example.com/{i}.jpg"})).status_code == 200)
    assert len(body["vin"]) == 17 and body["candidates"][0]["vin"] == body["vin"]
    assert 0 < body["confidence"] <= 1 and set(body["box"]) == {"xmin", "ymin", "xmax", "ymax"}


def test_obd_moved_to_the_sdk_path(http):
    assert get(http, "/v1/obd", code="P0420").status_code == 404
    body = get(http, "/obdcodesdecoder", code="P0420").json()
    assert body["code"] == "P0420" and "Catalyst" in body["diagnosis"]


@pytest.mark.parametrize("code", ["P0115", "p0115", "P2A00", "B1234", "C0561", "U3FFF", "P9999"])
def test_obd_answers_any_well_formed_code_deterministically(http, code):
    first, second = get(http, "/obdcodesdecoder", code=code), get(http, "/obdcodesdecoder", code=code)
    assert first.status_code == 200, first.text
    assert first.json()["code"] == code.upper() and first.json()["diagnosis"]
    assert first.json()["diagnosis"] == second.json()["diagnosis"]


def test_obd_sdk_example_is_the_coolant_sensor(http):
    assert "Coolant" in get(http, "/obdcodesdecoder", code="P0115").json()["diagnosis"]


@pytest.mark.parametrize("code", ["P011", "P01155", "X0115", "P0G15", "0115", "P 0115"])
def test_obd_malformed_code_is_not_found(http, code):
    assert_error(get(http, "/obdcodesdecoder", code=code), 404, f"Could not find code {code.strip().upper()}")


def test_obd_missing_code(http):
    assert_error(get(http, "/obdcodesdecoder"), 400, "Missing code parameter")


def test_ymm_options_year_make_model_lists_variants(http):
    # The SDK README: "add `year` for makes, `make` for models, and `model` for variants".
    body = get(http, "/v1/ymm-options", year="2026", make="Toyota", model="Tacoma").json()
    assert "variants" in body and "trims" not in body
    assert body["variants"] and all(v.startswith("Tacoma ") for v in body["variants"])
    assert "modelCount" not in body
    assert "trims" in get(http, "/v1/ymm-options", dimension="trims", year="2026", make="Toyota", model="Tacoma").json()


@pytest.mark.parametrize("spelling", ["deepdata", "deepData"])
def test_specs_deep_data_in_both_sdk_spellings(http, spelling):
    body = get(http, "/specs", vin=VIN, **{spelling: "1"}).json()
    assert "deepdata" in body and body["input"][spelling] == "1"
    assert "deepdata" not in get(http, "/specs", vin=VIN).json()


SOURCE_CALLS = [
    ("/specs", {"vin": VIN}), ("/v1/international-vin-decoder", {"vin": "WBA3A5C50DF123456"}),
    ("/v1/recalls", {"vin": VIN}), ("/v1/recalls-ymm", {"year": "2019", "make": "Toyota", "model": "Camry"}),
    ("/v2/marketvalue", {"vin": VIN}), ("/marketvalue", {"vin": VIN}), ("/history", {"vin": VIN}),
    ("/v1/lien-theft", {"vin": VIN}), ("/v2/platedecoder", {"plate": "TST001", "country": "US", "state": "CA"}),
    ("/v1/us-platedecoder", {"plate": "TST001", "state": "CA"}), ("/platedecoder", {"plate": "TST001", "state": "CA"}),
    ("/v1/ymm-options", {"year": "2020"}), ("/images", {"make": "Toyota", "model": "Camry"}),
    ("/obdcodesdecoder", {"code": "P0115"}), ("/v1/ymm", {"year": "2020", "make": "Toyota", "model": "Camry"}),
]


@pytest.mark.parametrize(("path", "params"), SOURCE_CALLS, ids=[p for p, _ in SOURCE_CALLS])
@pytest.mark.parametrize("source", ["pip", "npm"])
def test_the_sdks_source_parameter_changes_nothing(http, path, params, source):
    plain, tagged = get(http, path, **params), get(http, path, source=source, **params)
    assert plain.status_code == tagged.status_code == 200, tagged.text
    strip = lambda body: {k: v for k, v in body.items() if k != "timestamp"}  # noqa: E731
    assert strip(plain.json()) == strip(tagged.json())
