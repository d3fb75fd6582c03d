"""The recall batch state machine, webhook delivery, idempotent submit and x402 token scoping."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fleet_data.connectors.sandbox import FaultConfig, SandboxConfig, run_sandbox
from fleet_data.connectors.sandbox.vehicles import synthetic_vin

from .sandbox_http import KEY, VIN, VIN_NO_DATA, assert_error, get

SUBMIT = "/v1/recalls-batch/submit"
BODY_INVALID = ("Request body must include at least one of: vins (non-empty array), csv (text), "
                "or csvUrl (https link to a CSV) with valid 17-character VINs.")
VINS = [synthetic_vin(f"batch-test-{i}") for i in range(40)] + [VIN, VIN_NO_DATA]


class _Receiver(BaseHTTPRequestHandler):
    """Loopback endpoint: records webhook POSTs and serves a CSV on GET."""
    received: list = []
    csv_text = "vin\n" + "\n".join(VINS[:5]) + "\n"

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers), json.loads(body)))
        self.send_response(204)
        self.end_headers()

    def do_GET(self):  # noqa: N802
        data = self.csv_text.encode()
        self.send_response(200 if self.path == "/fleet.csv" else 404)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def receiver():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Receiver.received
    server.shutdown()
    server.server_close()
    thread.join(5)


def submit(http, body, key=KEY, headers=None):
    params = {"key": key} if key else {}
    return http.post(SUBMIT, params=params, json=body, headers=headers or {})


def wait_finished(http, batch_id, *, key=KEY, headers=None, limit=10.0) -> dict:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        params = {"batchId": batch_id, **({"key": key} if key else {})}
        data = http.get("/v1/recalls-batch/status", params=params, headers=headers or {}).json()["data"]
        if data["status"] in ("completed", "partial", "failed"):
            return data
        time.sleep(0.02)
    raise AssertionError("batch did not finish in time")


def wait_for(predicate, limit=5.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def test_lifecycle_results_download_and_webhook(sandbox, http, receiver):
    url, received = receiver
    sandbox.reset_stats()
    accepted = submit(http, {"vins": VINS, "webhookUrl": url + "/hook"})
    assert accepted.status_code == 202
    body = accepted.json()
    data = body["data"]
    assert data["status"] == "uploading" and data["processedVins"] == 0 and data["totalVins"] == len(VINS)
    assert data["batchId"].startswith("rb_") and "batchToken" not in data
    assert "status" in body["message"] and "webhook" in body["message"]
    assert sandbox.units(KEY, "recalls") == len(VINS)

    job = wait_finished(http, data["batchId"])
    assert job["status"] == "completed" and job["processedVins"] == len(VINS) and job["completedAt"]
    results = get(http, "/v1/recalls-batch/results", batchId=data["batchId"]).json()["data"]
    assert results["job"] == {"batchId": data["batchId"], "numericBatchId": job["numericBatchId"],
                              "status": "completed"}
    by_vin = {r["vin"]: r for r in results["results"]}
    assert by_vin[VIN]["recallCount"] == get(http, "/v1/recalls", vin=VIN).json()["data"]["recall_count"] > 0
    assert by_vin[VIN]["hasRecalls"] is True and by_vin[VIN_NO_DATA]["recallCount"] == 0

    csv = get(http, "/v1/recalls-batch/download", batchId=data["batchId"])
    assert csv.headers["content-type"].startswith("text/csv")
    lines = csv.text.strip().split("\n")
    assert lines[0] == "vin,hasRecalls,recallCount" and len(lines) == len(VINS) + 1
    assert f"{VIN},true,{by_vin[VIN]['recallCount']}" in lines

    wait_for(lambda: any(p["batchId"] == data["batchId"] for _, p in received))
    headers, payload = next((h, p) for h, p in received if p["batchId"] == data["batchId"])
    assert headers["X-Service-Event"] == "recalls_batch.completed"
    assert payload == {"event": "recalls_batch.completed", "batchId": data["batchId"],
                       "numericBatchId": job["numericBatchId"], "status": "completed",
                       "totalVins": len(VINS), "processedVins": len(VINS), "completedAt": job["completedAt"]}
    delivery = next(d for d in sandbox.webhooks() if d["batchId"] == data["batchId"])
    assert delivery["status"] == 204 and delivery["error"] is None
    assert sandbox.units(KEY, "recalls") == len(VINS) + 1  # follow-ups are free; the /v1/recalls call is not


def test_results_before_completion_are_rejected():
    with run_sandbox(SandboxConfig(batch_vins_per_second=2)) as slow:
        import httpx
        with httpx.Client(base_url=slow.url, trust_env=False) as http:
            batch_id = submit(http, {"vins": VINS[:10]}).json()["data"]["batchId"]
            time.sleep(0.3)
            status = get(http, "/v1/recalls-batch/status", batchId=batch_id).json()["data"]
            assert status["status"] == "processing" and 0 < status["processedVins"] < 10
            for path in ("/v1/recalls-batch/results", "/v1/recalls-batch/download"):
                assert_error(get(http, path, batchId=batch_id), 409,
                             "Batch processing is not yet complete. Please check the status later.")
            slow.set_batch_rate(10_000)
            assert wait_finished(http, batch_id)["status"] == "completed"


@pytest.mark.parametrize("body", [None, {}, {"vins": []}, {"vins": ["SHORT"]}, {"vins": "1HGCM82633A004352"},
                                  {"vins": [VIN, "1HGCM82633A00435O"]}, {"csv": "vin\n"}])
def test_submit_validation(http, body):
    response = http.post(SUBMIT, params={"key": KEY}, content=b"not json" if body is None else json.dumps(body))
    assert_error(response, 400, BODY_INVALID)


def test_submit_limits_urls_and_method(http):
    too_many = submit(http, {"vins": [VIN] * 10_001})
    assert_error(too_many, 400, "A batch may contain at most 10,000 VINs; this request has 10,001.")
    assert_error(submit(http, {"vins": [VIN], "webhookUrl": "ftp://example.com/x"}), 400,
                 "webhookUrl must be a valid https:// URL.")
    assert_error(submit(http, {"csvUrl": "http://example.com/f.csv"}), 400,
                 "csvUrl must be an https:// link to a CSV file.")
    response = submit(http, {"csvUrl": "https://storage.example.com/f.csv"})
    assert response.status_code == 400
    assert response.json()["message"].startswith("Could not download the CSV from csvUrl")
    for method in ("GET", "PUT", "DELETE"):
        assert_error(http.request(method, SUBMIT, params={"key": KEY}), 405,
                     "Method not allowed. Only POST is allowed for this endpoint.")
    assert_error(submit(http, {"vins": [VIN]}, key=None), 401, "Missing API key")


def test_submit_from_csv_text_and_loopback_csv_url(http, receiver):
    url, _ = receiver
    from_text = submit(http, {"csv": "vin,plate\n" + "\n".join(f"{v},X" for v in VINS[:3])}).json()
    assert from_text["data"]["totalVins"] == 3
    from_url = submit(http, {"csvUrl": url + "/fleet.csv"}).json()
    assert from_url["data"]["totalVins"] == 5
    missing = submit(http, {"csvUrl": url + "/missing.csv"})
    assert_error(missing, 400, "Could not download the CSV from csvUrl: HTTP 404")


def test_https_webhook_is_accepted_but_not_delivered_without_internet(sandbox, http):
    batch_id = submit(http, {"vins": [VIN], "webhookUrl": "https://hooks.example.com/x"}).json()["data"]["batchId"]
    wait_finished(http, batch_id)
    wait_for(lambda: any(d["batchId"] == batch_id for d in sandbox.webhooks()))
    delivery = next(d for d in sandbox.webhooks() if d["batchId"] == batch_id)
    assert delivery["status"] is None and "loopback" in delivery["error"]


def test_idempotent_submit_replays_and_charges_once(sandbox, http):
    sandbox.reset_stats()
    first = submit(http, {"vins": VINS[:4]}, headers={"Idempotency-Key": "abc"})
    again = submit(http, {"vins": VINS[:4]}, headers={"Idempotency-Key": "abc"})
    assert first.status_code == again.status_code == 202 and first.json() == again.json()
    other_caller = submit(http, {"vins": VINS[:4]}, key="other-key", headers={"Idempotency-Key": "abc"})
    assert other_caller.json()["data"]["batchId"] != first.json()["data"]["batchId"]
    assert sandbox.units(KEY, "recalls") == 4


def test_batches_are_private_to_their_account(http):
    batch_id = submit(http, {"vins": [VIN]}).json()["data"]["batchId"]
    not_found = "Batch not found or you do not have access to this batch."
    assert_error(get(http, "/v1/recalls-batch/status", key="someone-else", batchId=batch_id), 404, not_found)
    assert_error(get(http, "/v1/recalls-batch/results", batchId="rb_unknown"), 404, not_found)
    assert_error(get(http, "/v1/recalls-batch/results"), 400, "Missing batchId parameter")


def test_x402_submission_token_is_scoped_to_its_batch(sandbox, http):
    paid = {"X-Payment": "proof-of-payment"}
    first = submit(http, {"vins": VINS[:2]}, key=None, headers=paid).json()["data"]
    second = submit(http, {"vins": VINS[2:4]}, key=None, headers=paid).json()["data"]
    assert first["batchToken"] and first["batchToken"] != second["batchToken"]
    token = {"X-Service-Batch-Token": first["batchToken"]}
    assert wait_finished(http, first["batchId"], key=None, headers=token)["status"] == "completed"
    results = http.get("/v1/recalls-batch/results", params={"batchId": first["batchId"]}, headers=token)
    assert [r["vin"] for r in results.json()["data"]["results"]] == VINS[:2]
    other = http.get("/v1/recalls-batch/results", params={"batchId": second["batchId"]}, headers=token)
    assert_error(other, 404, "Batch not found or you do not have access to this batch.")
    assert_error(get(http, "/v1/recalls-batch/status", batchId=first["batchId"]), 404,
                 "Batch not found or you do not have access to this batch.")  # a key does not see it either
    csv_form = submit(http, {"csv": "vin\n" + VIN}, key=None, headers=paid)
    assert csv_form.status_code == 400 and "vins" in csv_form.json()["message"]


def test_batch_failure_fault(sandbox, http):
    sandbox.set_faults(FaultConfig(batch_fail_rate=1.0))
    batch_id = submit(http, {"vins": VINS[:10]}).json()["data"]["batchId"]
    sandbox.set_faults(FaultConfig())
    job = wait_finished(http, batch_id)
    assert job["status"] == "failed" and job["processedVins"] < 10
