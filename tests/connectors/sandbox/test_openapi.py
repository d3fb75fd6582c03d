"""The OpenAPI description is a valid 3.1 contract of the whole service, and the sandbox keeps to it.

The document is loaded from the repository file (so its validity does not depend on the sandbox);
the conformance tests then send schemathesis-generated requests to the in-process sandbox.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
import requests
import schemathesis
import yaml
from hypothesis import HealthCheck, Phase, settings
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

OPENAPI_PATH = Path(__file__).resolve().parents[3] / "connectors" / "sandbox" / "openapi.yaml"
SANDBOX_KEY = "sandbox_test_key"

# The spec's "Endpoints" section: the contract the document must cover.
SPEC_ENDPOINTS = {
    ("get", "/specs"),
    ("get", "/v1/international-vin-decoder"),
    ("get", "/v1/recalls"),
    ("get", "/v1/recalls-ymm"),
    ("post", "/v1/recalls-batch/submit"),
    ("get", "/v1/recalls-batch/results"),
    ("get", "/v2/platedecoder"),
    ("get", "/v1/us-platedecoder"),
    ("get", "/v2/marketvalue"),
    ("get", "/marketvalue"),
    ("get", "/history"),
    ("get", "/v1/lien-theft"),
    ("get", "/v1/ownership/vin"),
    ("get", "/v1/ownership/phone"),
    ("get", "/v1/ymm-options"),
    ("get", "/images"),
}
# Where the spec says "not shown", the vendor's SDKs (carsxe 1.4.0, PyPI and npm) show these paths.
SDK_ENDPOINTS = {
    ("get", "/v1/recalls-batch/status"),
    ("get", "/v1/recalls-batch/download"),
    ("post", "/platerecognition"),
    ("post", "/v1/vinocr"),
    ("get", "/obdcodesdecoder"),
    ("get", "/v1/ymm"),
    ("get", "/v1/ownership/person"),
    ("get", "/v1/ownership/address"),
    ("get", "/v1/ownership/zip"),
}
# Where neither shows them: the README's designed endpoints.
DESIGNED_ENDPOINTS = SDK_ENDPOINTS | {
    ("post", "/v1/ownership/phone/bulk"),
    ("get", "/platedecoder"),
}
# Paths we used to guess, which the real service does not serve.
RETIRED_PATHS = {"/v1/plate-recognition", "/v1/vin-ocr", "/v1/obd"}
# Standard keys are refused here (enterprise only): 403 is the documented, expected answer.
OWNERSHIP_PATHS = {"/v1/ownership/vin", "/v1/ownership/phone", "/v1/ownership/phone/bulk", "/v1/ownership/person",
                   "/v1/ownership/address", "/v1/ownership/zip"}
FOLLOW_UP_PATHS = {"/v1/recalls-batch/status", "/v1/recalls-batch/results", "/v1/recalls-batch/download"}

CONFORMANCE_CHECKS = [
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]

# Loopback only: proxies from the environment must never see these requests (they carry the key).
_LOOPBACK = requests.Session()
_LOOPBACK.trust_env = False


def _call_and_validate(case, base_url: str):
    """Send the case to the sandbox and check the answer against the document (not the sandbox's own rules)."""
    return case.call_and_validate(base_url=base_url, session=_LOOPBACK, checks=CONFORMANCE_CHECKS, timeout=10)


schema = schemathesis.openapi.from_path(
    OPENAPI_PATH,
    config=SchemathesisConfig.from_dict({"auth": {"openapi": {"apiKey": {"api_key": SANDBOX_KEY}}}}),
)


def _raw_document() -> dict:
    return yaml.safe_load(OPENAPI_PATH.read_text(encoding="utf-8"))


def test_document_is_valid_openapi_31() -> None:
    assert _raw_document()["openapi"].startswith("3.1.")
    schema.validate()  # raises on a document that breaks the OpenAPI 3.1 meta-schema


def test_every_spec_and_designed_endpoint_is_described() -> None:
    described = {(method, path) for path, item in _raw_document()["paths"].items() for method in item}
    assert SPEC_ENDPOINTS - described == set()
    assert DESIGNED_ENDPOINTS - described == set()
    assert RETIRED_PATHS & set(_raw_document()["paths"]) == set()


def test_every_operation_accepts_the_sdks_source_tag() -> None:
    document = _raw_document()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            refs = {p.get("$ref") for p in operation.get("parameters", [])}
            assert "#/components/parameters/Source" in refs, f"{method.upper()} {path}"


def test_authentication_schemes_match_the_spec() -> None:
    document = _raw_document()
    schemes = document["components"]["securitySchemes"]
    assert schemes["apiKey"] == {**schemes["apiKey"], "type": "apiKey", "in": "query", "name": "key"}
    assert schemes["batchToken"]["name"] == "X-Service-Batch-Token"
    assert schemes["x402Payment"]["name"] == "X-Payment"
    assert document["security"] == [{"apiKey": []}]
    for follow_up in ("status", "results", "download"):
        operation = document["paths"][f"/v1/recalls-batch/{follow_up}"]["get"]
        assert operation["security"] == [{"apiKey": []}, {"batchToken": []}]


def test_error_answers_use_the_error_envelope() -> None:
    # Every documented 4xx/5xx JSON answer must be the envelope (or a schema built on it).
    envelope_refs = {
        "#/components/schemas/ErrorEnvelope",
        "#/components/schemas/QuotaError",
        "#/components/schemas/CreditsError",
        "#/components/schemas/OwnershipError",
    }
    document = _raw_document()
    shared = document["components"]["responses"]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if int(status) < 400:
                    continue
                if "$ref" in response:
                    response = shared[response["$ref"].rsplit("/", 1)[-1]]
                body = response["content"]["application/json"]["schema"]
                refs = {body["$ref"]} if "$ref" in body else {option["$ref"] for option in body["anyOf"]}
                assert refs <= envelope_refs, f"{method.upper()} {path} {status}"


# --- against the sandbox -------------------------------------------------------------------


@pytest.fixture(scope="module")
def openapi_sandbox():
    sandbox = pytest.importorskip("fleet_data.connectors.sandbox", reason="the sandbox (connectors.sandbox) is not built yet")
    if not hasattr(sandbox, "run_sandbox"):
        pytest.skip("connectors.sandbox has no run_sandbox yet")
    with sandbox.run_sandbox() as server:
        yield server


@pytest.fixture(scope="module")
def sandbox_url(openapi_sandbox) -> str:
    return openapi_sandbox.url.rstrip("/")


def test_sandbox_serves_this_document(sandbox_url: str) -> None:
    response = httpx.get(f"{sandbox_url}/openapi.yaml", timeout=10, trust_env=False)
    assert response.status_code == 200
    assert yaml.safe_load(response.text) == _raw_document()


@schema.parametrize()
@settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_sandbox_conforms_to_the_document(case, sandbox_url: str) -> None:
    _call_and_validate(case, sandbox_url)


VALID_VINS = ["1HGCM82633A004352", "JH4KA7561PC008269"]  # real check digits
EXAMPLE_BODIES = {
    "/v1/recalls-batch/submit": {"vins": VALID_VINS},
    "/platerecognition": {"image": "https://example.com/plate.jpg"},
    "/v1/vinocr": {"upload_url": "https://example.com/vin.jpg"},  # the Python SDK's spelling
    "/v1/ownership/phone/bulk": {"phones": ["5555550100"]},
}


def _example_case(path: str, method: str):
    """A request built only from the document's own examples: what a well-behaved client sends."""
    document = _raw_document()
    shared = document["components"]["parameters"]
    query = {"key": SANDBOX_KEY}
    for parameter in document["paths"][path][method.lower()].get("parameters", []):
        if "$ref" in parameter:
            parameter = shared[parameter["$ref"].rsplit("/", 1)[-1]]
        if parameter["in"] == "query" and "example" in parameter:
            query[parameter["name"]] = parameter["example"]
    operation = schema[path][method.upper()]
    if path in EXAMPLE_BODIES:
        return operation.Case(query=query, body=EXAMPLE_BODIES[path], media_type="application/json")
    return operation.Case(query=query)


OWNERSHIP_OPERATIONS = sorted((p, m) for m, p in SPEC_ENDPOINTS | DESIGNED_ENDPOINTS if p in OWNERSHIP_PATHS)
SUCCESS_OPERATIONS = sorted(
    (path, method)
    for method, path in SPEC_ENDPOINTS | DESIGNED_ENDPOINTS
    # batch follow-ups need a real batch: covered by the lifecycle test below
    if path not in OWNERSHIP_PATHS and path not in FOLLOW_UP_PATHS
)


@pytest.mark.parametrize(("path", "method"), SUCCESS_OPERATIONS)
def test_documented_examples_succeed_with_a_standard_key(sandbox_url: str, path: str, method: str) -> None:
    response = _call_and_validate(_example_case(path, method), sandbox_url)
    assert 200 <= response.status_code < 300, response.text


@pytest.mark.parametrize(("path", "method"), OWNERSHIP_OPERATIONS)
def test_ownership_refuses_a_standard_key_as_documented(sandbox_url: str, path: str, method: str) -> None:
    response = _call_and_validate(_example_case(path, method), sandbox_url)
    assert response.status_code == 403
    assert response.json()["error"] == "api_not_enabled"


def test_batch_follow_ups_conform_through_the_lifecycle(openapi_sandbox, sandbox_url: str) -> None:
    def follow_up(name: str):
        case = schema[f"/v1/recalls-batch/{name}"]["GET"].Case(query={"key": SANDBOX_KEY, "batchId": batch_id})
        return _call_and_validate(case, sandbox_url)

    def wait_for(done) -> dict:
        for _ in range(100):  # bounded: about ten seconds at most
            job = follow_up("status").json()["data"]
            if done(job):
                return job
            time.sleep(0.1)
        raise AssertionError(f"batch stuck at {job}")

    openapi_sandbox.set_batch_rate(1e-6)  # holds the batch at one processed VIN, so 409 is certain
    try:
        accepted = _call_and_validate(_example_case("/v1/recalls-batch/submit", "post"), sandbox_url)
        assert accepted.status_code == 202
        batch_id = accepted.json()["data"]["batchId"]
        wait_for(lambda job: job["processedVins"] >= 1)
        assert follow_up("results").status_code == 409
        assert follow_up("download").status_code == 409
    finally:
        openapi_sandbox.set_batch_rate(1000.0)
    assert wait_for(lambda job: job["status"] != "processing")["status"] == "completed"

    results = follow_up("results").json()["data"]["results"]
    assert {item["vin"] for item in results} == set(VALID_VINS)
    download = follow_up("download")
    assert download.status_code == 200
    assert download.text.splitlines()[0] == "vin,hasRecalls,recallCount"


# Sandbox test keys that force each documented account error (see connectors.sandbox.TEST_KEYS).
ACCOUNT_ERRORS = [
    (None, 401),
    ("test_unknown", 401),
    ("test_inactive", 401),
    ("test_blocked", 403),
    ("test_prepaid_0", 402),
    ("test_quota_0", 429),
    ("test_recharge_1000", 503),  # the first 1,000 calls of this key wait for an auto-recharge
]
ACCOUNT_ERROR_OPERATIONS = [("/specs", "get"), ("/v2/platedecoder", "get"), ("/v1/recalls-batch/submit", "post")]


@pytest.mark.parametrize(("path", "method"), ACCOUNT_ERROR_OPERATIONS)
@pytest.mark.parametrize(("key", "status"), ACCOUNT_ERRORS)
def test_account_errors_conform(sandbox_url: str, path: str, method: str, key: str | None, status: int) -> None:
    case = _example_case(path, method)
    if key is None:
        del case.query["key"]
    else:
        case.query["key"] = key
    response = _call_and_validate(case, sandbox_url)
    assert response.status_code == status, response.text
    assert response.json()["success"] is False


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_upstream_failures_conform(status: int) -> None:
    sandbox = pytest.importorskip("fleet_data.connectors.sandbox", reason="the sandbox (connectors.sandbox) is not built yet")
    config = sandbox.SandboxConfig(faults=sandbox.FaultConfig(rate=1.0, statuses=[status]))
    with sandbox.run_sandbox(config) as server:
        for path, method in [("/specs", "get"), ("/v1/us-platedecoder", "get"), ("/v1/recalls-batch/submit", "post")]:
            response = _call_and_validate(_example_case(path, method), server.url)
            assert response.status_code == status, response.text
            if status != 500:
                assert response.headers["retry-after"] == ["60"]  # schemathesis: lowercase keys, list values
                assert response.json()["retryable"] is True


@pytest.mark.parametrize(("path", "method"), OWNERSHIP_OPERATIONS)
def test_ownership_answers_an_enterprise_key_as_documented(sandbox_url: str, path: str, method: str) -> None:
    case = _example_case(path, method)
    case.query["key"] = "test_enterprise"
    response = _call_and_validate(case, sandbox_url)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/images", {"make": "Toyota"}),  # legacy: missing model is a 500, not a 400
        ("/marketvalue", {"vin": "1HGCM8263"}),  # legacy: validation problems are 500 with success:false
    ],
)
def test_legacy_500_quirks_are_documented(sandbox_url: str, path: str, query: dict) -> None:
    case = schema[path]["GET"].Case(query={"key": SANDBOX_KEY, **query})
    response = _call_and_validate(case, sandbox_url)
    assert response.status_code == 500
    assert response.json()["success"] is False


def test_x402_submit_and_batch_token_follow_up_conform(sandbox_url: str) -> None:
    submit = schema["/v1/recalls-batch/submit"]["POST"].Case(
        headers={"X-Payment": "sandbox-proof-1"}, body={"vins": VALID_VINS}, media_type="application/json"
    )
    accepted = _call_and_validate(submit, sandbox_url)
    assert accepted.status_code == 202
    data = accepted.json()["data"]
    status = schema["/v1/recalls-batch/status"]["GET"].Case(
        query={"batchId": data["batchId"]}, headers={"X-Service-Batch-Token": data["batchToken"]}
    )
    assert _call_and_validate(status, sandbox_url).status_code == 200

    csv_with_payment = schema["/v1/recalls-batch/submit"]["POST"].Case(
        headers={"X-Payment": "sandbox-proof-2"},
        body={"csv": "vin\n1HGCM82633A004352\n"},
        media_type="application/json",
    )
    refused = _call_and_validate(csv_with_payment, sandbox_url)
    assert refused.status_code == 400
