"""The vendor's npm SDK (`carsxe-api` 1.4.0, pinned in npm_sdk/package-lock.json) against the sandbox.

The same contract as test_vendor_sdk.py for the Python SDK: every method, called as the npm
README calls it, gets a 2xx with the fields the README reads, and one bad input per method gets
the spec's status and message. Node runs every call in one process, one after another; the
sandbox's journal holds one request per call, in the same order, so it gives each call's path
and status. Needs node (>= 14) and npm; without them the test is skipped and says so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox
from fleet_data.connectors.sandbox import errors as msg

HERE = Path(__file__).resolve().parent / "npm_sdk"
KEY = "npm_sdk_test_key"
ENTERPRISE = "test_enterprise"
PLATE_IMAGE = "https://api.carsxe.com/img/apis/plate_recognition.JPG"
VIN_IMAGE = "https://user-images.githubusercontent.com/5663423/30922082-64edb4fa-a3a8-11e7-873e-3fbcdce8ea3a.png"
PERSON = {"first_name": "John", "last_name": "Sample", "address": "123 Example St", "zip": "90210"}
NOT_FOUND_BATCH = "Batch not found or you do not have access to this batch."

pytestmark = pytest.mark.skipif(
    not (shutil.which("node") and shutil.which("npm")),
    reason="node and npm are not installed: the npm SDK check needs node >= 14 and npm (e.g. apt-get install nodejs npm)",
)


@pytest.fixture(scope="module")
def sdk_dir(tmp_path_factory) -> Path:
    """The locked SDK installed with `npm ci` into a temporary folder (nothing written into the repo)."""
    folder = tmp_path_factory.mktemp("npm_sdk")
    for name in ("package.json", "package-lock.json", "drive.js"):
        shutil.copy(HERE / name, folder / name)
    done = subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=folder,
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.skip(f"npm ci could not install carsxe-api 1.4.0 (is the npm registry reachable?): {done.stderr[-300:]}")
    return folder


@pytest.fixture(scope="module")
def sandbox():
    with run_sandbox(SandboxConfig(batch_vins_per_second=5000)) as sb:
        sb.record_journal(True)
        yield sb


def drive(sdk_dir: Path, sandbox, calls: list[tuple[str, dict, str]]) -> tuple[list[str], list[dict]]:
    """Run (method, params, key) calls in node; each answer gets its path and status from the journal."""
    (sdk_dir / "calls.json").write_text(json.dumps([{"method": m, "params": p, "key": k} for m, p, k in calls]))
    sandbox.reset_stats()
    done = subprocess.run(["node", "drive.js", "calls.json", "answers.json"], cwd=sdk_dir, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "SANDBOX_URL": sandbox.url})
    assert done.returncode == 0, done.stderr
    out = json.loads((sdk_dir / "answers.json").read_text())
    journal = sandbox.journal()
    assert len(journal) == len(calls), journal  # one request per SDK call
    answers = [{**a, "path": j["endpoint"], "status": j["status"]} for a, j in zip(out["answers"], journal)]
    return out["methods"], answers


# method -> (the npm README's params, path, fields the answer must carry, enterprise key?)
GOOD = {
    "specs": ({"vin": "WBAFR7C57CC811956"}, "/specs", ["input.vin"], False),
    "internationalVinDecoder": ({"vin": "WF0MXXGBWM8R43240"}, "/v1/international-vin-decoder", ["attributes.vin"], False),
    "marketvalue": ({"vin": "WBAFR7C57CC811956", "state": "CA", "mileage": "45000", "condition": "clean"},
                    "/v2/marketvalue", ["input.vin", "retail_clean"], False),
    "history": ({"vin": "WBAFR7C57CC811956"}, "/history", ["vin"], False),
    "platedecoder": ({"plate": "7XER187", "state": "CA", "country": "US"}, "/v2/platedecoder", ["make", "vin"], False),
    "images": ({"make": "BMW", "model": "X5", "year": "2019"}, "/images", ["images.0.link"], False),
    "recalls": ({"vin": "1C4JJXR64PW696340"}, "/v1/recalls", ["data.vin"], False),
    "recallsYmm": ({"year": "2023", "make": "Toyota", "model": "Camry"}, "/v1/recalls-ymm", ["data.model_year"], False),
    "recallsByYmm": ({"year": "2023", "make": "Toyota", "model": "Camry"}, "/v1/recalls-ymm", ["data.make"], False),
    "plateImageRecognition": ({"imageUrl": PLATE_IMAGE}, "/platerecognition", ["results.0.plate"], False),
    "vinOcr": ({"imageUrl": VIN_IMAGE}, "/v1/vinocr", ["vin"], False),
    "yearMakeModel": ({"year": "2023", "make": "Toyota", "model": "Camry"}, "/v1/ymm", ["bestMatch.name"], False),
    "ymmOptions": ({"dimension": "models", "year": "2023", "make": "Toyota"}, "/v1/ymm-options", ["models"], False),
    "obdcodesdecoder": ({"code": "P0115"}, "/obdcodesdecoder", ["diagnosis"], False),
    "lienAndTheft": ({"vin": "2C3CDXFG1FH762860"}, "/v1/lien-theft", ["events.0.event"], False),
    "ownershipVin": ({"vin": "1FT8X3BT0BEA61538"}, "/v1/ownership/vin", ["owners.0.last_name"], True),
    "ownershipPerson": (PERSON, "/v1/ownership/person", ["matches.0.last_name"], True),
    "ownershipAddress": ({"address": "123 Example St", "zip": "90210"}, "/v1/ownership/address",
                         ["matches.0.address.street"], True),
    "ownershipZip": ({"zip": "90210", "gender": "F", "page": 1, "limit": 15}, "/v1/ownership/zip", ["records.0.gender"], True),
}
BATCH = ["recallsBatchSubmit", "recallsBatchStatus", "recallsBatchResults", "recallsBatchDownload"]
# method -> (bad params, status, message, enterprise key?)
BAD = {
    "specs": ({"vin": "1HGCM8263"}, 400, msg.WRONG_VIN_LENGTH, False),
    "internationalVinDecoder": ({"vin": "1HGCM82633A00435O"}, 400, msg.INVALID_VIN, False),
    "marketvalue": ({"vin": "WBAFR7C57CC811956", "mileage": "lots"}, 400, msg.INVALID_MILEAGE, False),
    "history": ({"vin": "1HGCM8263"}, 400, msg.WRONG_VIN_LENGTH, False),
    "platedecoder": ({"state": "CA", "country": "US"}, 400, msg.MISSING_PLATE, False),
    "images": ({"make": "Nomake", "model": "X"}, 404, msg.NO_IMAGES, False),
    "recalls": ({"vin": "1HGCM8263"}, 400, msg.WRONG_VIN_LENGTH, False),
    "recallsYmm": ({"make": "Toyota", "model": "Camry"}, 400, msg.MISSING_YMM, False),
    "recallsByYmm": ({"year": "23", "make": "Toyota", "model": "Camry"}, 400, msg.MISSING_YMM, False),
    "recallsBatchSubmit": ({"vins": []}, 400, msg.BATCH_BODY_INVALID, False),
    "recallsBatchStatus": ({"batchId": "rb_nope"}, 404, NOT_FOUND_BATCH, False),
    "recallsBatchResults": ({"batchId": "rb_nope"}, 404, NOT_FOUND_BATCH, False),
    "plateImageRecognition": ({"imageUrl": "not an image!"}, 400, msg.INVALID_IMAGE, False),
    "vinOcr": ({}, 400, msg.MISSING_IMAGE, False),
    "yearMakeModel": ({"year": "2023", "make": "Toyota"}, 400, msg.MISSING_YMM, False),
    "ymmOptions": ({"dimension": "trims", "make": "Toyota"}, 400, msg.YMM_MODEL_FOR_TRIMS, False),
    "obdcodesdecoder": ({"code": "X0115"}, 404, "Could not find code X0115", False),
    "lienAndTheft": ({"vin": "1HGCM8263"}, 400, msg.WRONG_VIN_LENGTH, False),
    "ownershipVin": ({"vin": "1HGCM8263"}, 400, msg.WRONG_VIN_LENGTH, True),
    "ownershipPerson": ({**PERSON, "zip": "9021"}, 400, msg.INVALID_ZIP, True),
    "ownershipAddress": ({"address": "123 Example St"}, 400, msg.MISSING_ADDRESS, True),
    "ownershipZip": ({"zip": "90210", "limit": 500}, 400, msg.INVALID_LIMIT, True),
}


def _field(body, dotted: str):
    for part in dotted.split("."):
        body = body[int(part)] if isinstance(body, list) else body[part]
    return body


def test_every_npm_method_answers_its_readme_call_and_refuses_bad_input(sdk_dir, sandbox):
    calls = [(m, p, ENTERPRISE if ent else KEY) for m, (p, _, _, ent) in GOOD.items()]
    calls += [(m, p, ENTERPRISE if ent else KEY) for m, (p, _, _, ent) in BAD.items()]
    methods, answers = drive(sdk_dir, sandbox, calls)
    assert set(methods) == set(GOOD) | set(BATCH)  # nothing left out
    assert set(BAD) | {"recallsBatchDownload"} == set(methods)  # download's bad input: see the batch test
    for (method, (_, path, fields, _)), answer in zip(GOOD.items(), answers):
        assert (answer["path"], answer["status"]) == (path, 200), (method, answer)
        assert answer["body"]["success"] is True
        for dotted in fields:
            assert _field(answer["body"], dotted) not in (None, "", [], {}), (method, dotted)
    for (method, (_, status, message, _)), answer in zip(BAD.items(), answers[len(GOOD):]):
        assert answer["status"] == status, (method, answer)
        assert answer["body"]["success"] is False and answer["body"]["message"] == message, (method, answer)


def test_npm_recalls_batch_from_submit_to_csv(sdk_dir, sandbox):
    vins = ["1HGBH41JXMN109186", "5YJSA1E26HF000001"]  # the npm README's batch
    _, [submitted] = drive(sdk_dir, sandbox, [("recallsBatchSubmit", {
        "vins": vins, "webhookUrl": "https://example.com/webhooks/carsxe-recalls"}, KEY)])
    assert (submitted["path"], submitted["status"]) == ("/v1/recalls-batch/submit", 202)
    batch_id = submitted["body"]["data"]["batchId"]
    for _ in range(50):  # bounded: 5,000 VINs a second, each round a node start (~0.1 s)
        _, [status] = drive(sdk_dir, sandbox, [("recallsBatchStatus", {"batchId": batch_id}, KEY)])
        if status["body"]["data"]["status"] == "completed":
            break
    assert status["body"]["data"]["status"] == "completed"
    _, (results, download, missing) = drive(sdk_dir, sandbox, [
        ("recallsBatchResults", {"batchId": batch_id}, KEY), ("recallsBatchDownload", {"batchId": batch_id}, KEY),
        ("recallsBatchDownload", {"batchId": "rb_nope"}, KEY)])
    assert results["status"] == 200 and {r["vin"] for r in results["body"]["data"]["results"]} == set(vins)
    assert (download["path"], download["status"]) == ("/v1/recalls-batch/download", 200)
    assert download["body"].splitlines()[0] == "vin,hasRecalls,recallCount"  # recallsBatchDownload returns text
    assert missing["status"] == 404 and json.loads(missing["body"])["message"] == NOT_FOUND_BATCH


def test_npm_spellings_deepdata_and_image(sdk_dir, sandbox):
    _, [deep] = drive(sdk_dir, sandbox, [("specs", {"vin": "1HGCM82633A004352", "deepdata": "1"}, KEY)])
    assert deep["status"] == 200 and "deepdata" in deep["body"]
