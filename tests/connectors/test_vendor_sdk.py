"""The vendor's official Python SDK (PyPI `carsxe` 1.4.0) against the sandbox, method by method.

The SDK is the vendor's own statement of the real paths, parameters and bodies where our spec
says "not shown". Every one of its methods must get a 2xx answer carrying the fields its README
shows (and the ones the spec or the vendor's types name), and one bad input per method must get
the spec's error, status and message. The SDK hides the status, so the sandbox's call journal
tells it: exactly one request per SDK call, on the path the SDK chose.

The SDK hard-codes `https://api.carsxe.com` in `_get_api_base_url`; a subclass points that one
method at the sandbox on 127.0.0.1. Everything else runs as shipped, aiohttp session and all.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import Any, Callable

import pytest

carsxe_api = pytest.importorskip("carsxe_api", reason="the vendor SDK is a dev dependency: make install")

from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox  # noqa: E402
from fleet_data.connectors.sandbox import errors as msg  # noqa: E402

KEY = "sdk_test_key"
ENTERPRISE = "test_enterprise"
README_IMAGE = "https://api.carsxe.com/img/apis/plate_recognition.JPG"
README_BATCH = ["1HGBH41JXMN109186", "5YJSA1E26HF000001", "1C4JJXR64PW696340"]


class SandboxCarsXE(carsxe_api.CarsXE):
    """The shipped client, with only its hard-coded base URL replaced."""

    def __init__(self, api_key: str, base_url: str) -> None:
        super().__init__(api_key)
        self._sandbox_url = base_url

    def _get_api_base_url(self) -> str:
        return self._sandbox_url


@pytest.fixture(scope="module")
def sandbox():
    with run_sandbox(SandboxConfig(batch_vins_per_second=5000)) as sb:
        sb.record_journal(True)
        yield sb


@dataclass
class Answer:
    path: str
    status: int
    body: Any  # what the SDK returned: a dict, or text for the CSV download


def call(sandbox, method: str, params: dict, *, key: str = KEY) -> Answer:
    """One SDK call; the journal proves it made exactly one request, and says where and with what status."""
    sandbox.reset_stats()
    sdk = SandboxCarsXE(key, sandbox.url)
    body = asyncio.run(getattr(sdk, method)(dict(params)))
    journal = sandbox.journal()
    assert len(journal) == 1, journal
    return Answer(journal[0]["endpoint"], journal[0]["status"], body)


# --- every method, as its README calls it ------------------------------------------------------


def _has(*fields: str) -> Callable[[dict], None]:
    def check(body: dict) -> None:
        assert body["success"] is True, body
        for dotted in fields:
            value = body
            for part in dotted.split("."):
                value = value[int(part)] if isinstance(value, list) else value[part]
            assert value not in (None, "", [], {}), dotted

    return check


# method -> (README params, path the SDK calls, status, fields the answer must carry, enterprise key?)
GOOD: dict[str, tuple[dict, str, int, Callable[[dict], None], bool]] = {
    "specs": ({"vin": "WBAFR7C57CC811956"}, "/specs", 200, _has("input.vin", "attributes.make"), False),
    "int_vin_decoder": ({"vin": "WF0MXXGBWM8R43240"}, "/v1/international-vin-decoder", 200,
                        _has("input.vin", "attributes.vin", "attributes.make"), False),
    "recalls": ({"vin": "1C4JJXR64PW696340"}, "/v1/recalls", 200, _has("input.vin", "data.vin", "data.model_year"), False),
    "plate_decoder": ({"plate": "7XER187", "state": "CA", "country": "US"}, "/v2/platedecoder", 200,
                      _has("input.plate", "make", "model", "year", "vin"), False),
    "images": ({"make": "BMW", "model": "X5", "year": "2019"}, "/images", 200, _has("images.0.link", "query.make"), False),
    "market_value": ({"vin": "WBAFR7C57CC811956", "mileage": "50000", "condition": "clean"}, "/v2/marketvalue", 200,
                     _has("input.vin", "retail_clean.adjusted_retail_clean", "mileage_list"), False),
    "history": ({"vin": "WBAFR7C57CC811956"}, "/history", 200, _has("vin", "historyInformation"), False),
    "plate_image_recognition": ({"upload_url": README_IMAGE}, "/platerecognition", 200,
                                _has("results.0.plate", "results.0.box"), False),
    "vin_ocr": ({"upload_url": README_IMAGE}, "/v1/vinocr", 200, _has("vin", "candidates.0.vin"), False),
    "year_make_model": ({"year": "2012", "make": "BMW", "model": "5 Series"}, "/v1/ymm", 200,
                        _has("input.model", "bestMatch.name", "trimOptions"), False),
    "obd_codes_decoder": ({"code": "P0115"}, "/obdcodesdecoder", 200, _has("code", "diagnosis"), False),
    "lien_and_theft": ({"vin": "2C3CDXFG1FH762860"}, "/v1/lien-theft", 200, _has("input.vin", "events.0.event"), False),
    "recalls_ymm": ({"year": "2026", "make": "toyota", "model": "corolla"}, "/v1/recalls-ymm", 200,
                    _has("input.year", "data.model_year", "data.make"), False),
    "ymm_options": ({"year": "2026", "make": "Toyota", "model": "Tacoma"}, "/v1/ymm-options", 200, _has("variants"), False),
    "ownership_vin": ({"vin": "1FT8X3BT0BEA61538"}, "/v1/ownership/vin", 200, _has("vin", "vehicle.make", "owners.0.last_name"), True),
    "ownership_person": ({"first_name": "John", "last_name": "Sample", "address": "123 Example St", "zip": "90210"},
                         "/v1/ownership/person", 200, _has("matches.0.first_name", "matches.0.address.zip"), True),
    "ownership_address": ({"address": "123 Example St", "zip": "90210"}, "/v1/ownership/address", 200,
                          _has("matches.0.address.street"), True),
    "ownership_zip": ({"zip": "90210", "gender": "F", "min_age": "45"}, "/v1/ownership/zip", 200,
                      _has("zip", "records.0.gender", "filters.gender"), True),
}
BATCH_METHODS = {"submit_bulk_recall_batch", "get_bulk_recall_batch_status", "get_bulk_recall_batch_results",
                 "get_bulk_recall_batch_download"}

NOT_FOUND_BATCH = "Batch not found or you do not have access to this batch."
# method -> (bad params, status, the spec's message (ours where the spec shows none), enterprise key?)
BAD: dict[str, tuple[dict, int, str, bool]] = {
    "specs": ({"vin": "1HGCM8263"}, 400, msg.WRONG_VIN_LENGTH, False),
    "int_vin_decoder": ({"vin": "1HGCM82633A00435O"}, 400, msg.INVALID_VIN, False),
    "recalls": ({"vin": "1HGCM8263"}, 400, msg.WRONG_VIN_LENGTH, False),
    "plate_decoder": ({"plate": "7XER187", "state": "ZZ", "country": "XX"}, 404, msg.INVALID_STATE_OR_COUNTRY, False),
    "images": ({"make": "Nomake", "model": "X"}, 404, msg.NO_IMAGES, False),
    "market_value": ({"vin": "WBAFR7C57CC811956", "condition": "mint"}, 400, msg.INVALID_CONDITION, False),
    "history": ({"vin": ""}, 400, msg.MISSING_VIN, False),  # the SDK only refuses a missing key, not an empty value
    "plate_image_recognition": ({"upload_url": "not an image!"}, 400, msg.INVALID_IMAGE, False),
    "vin_ocr": ({"upload_url": ""}, 400, msg.MISSING_IMAGE, False),
    "year_make_model": ({"year": "12", "make": "BMW", "model": "5 Series"}, 400, msg.MISSING_YMM, False),
    "obd_codes_decoder": ({"code": "P01"}, 404, "Could not find code P01", False),
    "lien_and_theft": ({"vin": "1HGCM8263"}, 400, msg.WRONG_VIN_LENGTH, False),
    "recalls_ymm": ({"year": "", "make": "toyota", "model": "corolla"}, 400, msg.MISSING_YMM, False),
    "submit_bulk_recall_batch": ({"vins": ["1HGCM8263"]}, 400, msg.BATCH_BODY_INVALID, False),
    "get_bulk_recall_batch_status": ({"batchId": "rb_nope"}, 404, NOT_FOUND_BATCH, False),
    "get_bulk_recall_batch_results": ({"batchId": "rb_nope"}, 404, NOT_FOUND_BATCH, False),
    "get_bulk_recall_batch_download": ({"batchId": "rb_nope"}, 404, NOT_FOUND_BATCH, False),
    "ymm_options": ({"dimension": "colors"}, 400, msg.INVALID_DIMENSION, False),
    "ownership_vin": ({"vin": "1HGCM8263"}, 400, msg.WRONG_VIN_LENGTH, True),
    "ownership_person": ({"first_name": "John", "last_name": "Sample", "address": "123 Example St", "zip": "9021"},
                         400, msg.INVALID_ZIP, True),
    "ownership_address": ({"address": "123 Example St", "zip": "ABCDE"}, 400, msg.INVALID_ZIP, True),
    "ownership_zip": ({"zip": "90210", "gender": "X"}, 400, msg.INVALID_GENDER, True),
}


def _sdk_methods() -> set[str]:
    return {name for name, fn in inspect.getmembers(carsxe_api.CarsXE, inspect.iscoroutinefunction)
            if not name.startswith("_")}


def test_every_sdk_method_is_covered():
    assert _sdk_methods() == set(GOOD) | BATCH_METHODS
    assert _sdk_methods() == set(BAD)


@pytest.mark.parametrize("method", sorted(GOOD))
def test_readme_call_gets_a_2xx_with_the_readme_fields(sandbox, method):
    params, path, status, check, enterprise = GOOD[method]
    answer = call(sandbox, method, params, key=ENTERPRISE if enterprise else KEY)
    assert (answer.path, answer.status) == (path, status), answer.body
    check(answer.body)


@pytest.mark.parametrize("method", sorted(BAD))
def test_bad_input_gets_the_spec_error(sandbox, method):
    params, status, message, enterprise = BAD[method]
    answer = call(sandbox, method, params, key=ENTERPRISE if enterprise else KEY)
    assert answer.status == status, answer.body
    assert answer.body["success"] is False and answer.body["message"] == message


def test_ownership_by_any_search_is_enterprise_only(sandbox):
    for method in ("ownership_vin", "ownership_person", "ownership_address", "ownership_zip"):
        answer = call(sandbox, method, GOOD[method][0], key=KEY)
        assert answer.status == 403 and answer.body["error"] == "api_not_enabled"
        assert answer.body["message"] == msg.OWNERSHIP_NOT_ENABLED


def test_recalls_batch_from_submit_to_csv(sandbox):
    submitted = call(sandbox, "submit_bulk_recall_batch",
                     {"vins": README_BATCH, "webhookUrl": "https://your-server.com/webhook"})
    assert (submitted.path, submitted.status) == ("/v1/recalls-batch/submit", 202)
    batch_id = submitted.body["data"]["batchId"]  # what the README reads
    assert submitted.body["data"]["totalVins"] == 3
    for _ in range(100):  # bounded: the sandbox processes 5,000 VINs a second
        status = call(sandbox, "get_bulk_recall_batch_status", {"batchId": batch_id})
        assert (status.path, status.status) == ("/v1/recalls-batch/status", 200)
        if status.body["data"]["status"] == "completed":
            break
        asyncio.run(asyncio.sleep(0.02))
    assert status.body["data"]["status"] == "completed" and status.body["data"]["processedVins"] == 3
    results = call(sandbox, "get_bulk_recall_batch_results", {"batchId": batch_id})
    assert (results.path, results.status) == ("/v1/recalls-batch/results", 200)
    assert {r["vin"] for r in results.body["data"]["results"]} == set(README_BATCH)
    download = call(sandbox, "get_bulk_recall_batch_download", {"batchId": batch_id})
    assert (download.path, download.status) == ("/v1/recalls-batch/download", 200)
    assert isinstance(download.body, str)  # the README: "returns CSV text when the batch is complete"
    lines = download.body.splitlines()
    assert lines[0] == "vin,hasRecalls,recallCount" and {line.split(",")[0] for line in lines[1:]} == set(README_BATCH)


def test_the_npm_sdk_spellings_reach_the_same_answers(sandbox):
    # The npm SDK sends `deepdata` and `{"image": ...}` where the Python one sends `deepData` and `upload_url`.
    deep = call(sandbox, "specs", {"vin": "1HGCM82633A004352", "deepData": "1"})
    assert deep.status == 200 and "deepdata" in deep.body
    by_upload = call(sandbox, "vin_ocr", {"upload_url": README_IMAGE}).body
    sandbox.reset_stats()
    import httpx

    by_image = httpx.post(f"{sandbox.url}/v1/vinocr", params={"key": KEY, "source": "npm"},
                          json={"image": README_IMAGE}, trust_env=False).json()
    assert {**by_image, "timestamp": 0} == {**by_upload, "timestamp": 0}
