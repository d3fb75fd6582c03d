"""The recall-batch ledger against the sandbox: what a refusal or a replay leaves behind.

- A permanent refusal at submit (a 4xx) ends the ledger entry as failed with its reason and puts
  its VINs in `failures` (dataset `recalls`), due again next run; it never stays `pending:`.
- An idempotent replay of a submit is marked by the service (`Idempotent-Replayed: true`) and
  recorded as 0 units: what `api_calls` says was spent equals what the service billed.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from fleet_data.connectors import AsyncVehicleDataClient
from fleet_data.connectors.sandbox.faults import FaultConfig
from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.recalls.batches import MAX_BATCH_VINS, BatchOptions, run_recall_batches
from fleet_data.tasks.ingest.vins import check_digit

from .conftest import KEY

SUBMIT, RESULTS = "/v1/recalls-batch/submit", "/v1/recalls-batch/results"


def vins(n: int, plant: str = "B") -> list[str]:
    out = []
    for i in range(n):
        body = f"1HGCM82603{plant}{i:06d}"
        out.append(body[:8] + check_digit(body) + body[9:])
    return out


def run(db, run_id, due, settings, tmp_path, batch_size=MAX_BATCH_VINS, webhook_url=None):
    batches = BatchOptions(tmp_path / "batches", batch_size, webhook_url, poll_interval=0.05)
    return asyncio.run(run_recall_batches(db, run_id, due, calls=Calls(settings), batches=batches))


def pending_entry(db, tmp_path, run_id: str, key: str, listed: list[str], at: datetime) -> None:
    """What a run killed between its submit and its ledger update leaves: `pending:<key>` and the VIN list."""
    folder = tmp_path / "batches"
    folder.mkdir(exist_ok=True)
    chunk = folder / f"{key}.parquet"
    pl.DataFrame({"vin": listed}).write_parquet(chunk)
    db.land("recall_batches", pl.DataFrame([{"batch_id": f"pending:{key}", "status": "submitting", "idempotency_key": key,
                                             "vins_count": len(listed), "vins_chunk": str(chunk), "fetched_at": at}]), run_id)


def test_a_refused_submit_ends_its_entry_and_its_vins_fail_until_the_next_run(store, sandbox, settings, tmp_path):
    due = vins(3)
    first = run(store, "r1", due, settings(), tmp_path, webhook_url="http://hooks.example.com/done")
    assert sandbox.count(SUBMIT, status=400) == 1
    assert (first.failed, first.pending, first.checked) == (3, 0, 0)
    ledger = store.sql("SELECT batch_id, status, message FROM recall_batches").rows()
    assert len(ledger) == 1 and ledger[0][0].startswith("refused:") and ledger[0][1] == "failed"
    assert "400" in ledger[0][2] and "webhook" in ledger[0][2].lower()
    assert store.query("unfinished_recall_batches").height == 0  # nothing for later runs to resubmit
    failed = store.sql("SELECT vin, dataset, status, retryable FROM failures ORDER BY vin").rows()
    assert failed == [(v, "recalls", 400, False) for v in sorted(due)]
    assert not list((tmp_path / "batches").iterdir())

    second = run(store, "r2", due, settings(), tmp_path)  # due again: no recall check landed
    assert (second.checked, second.failed) == (3, 0)
    assert store.sql("SELECT count(*) FROM failures WHERE resolved_at IS NULL").item() == 0


def test_a_left_behind_entry_the_service_refuses_is_ended_not_resubmitted_forever(store, sandbox, settings, tmp_path):
    key = uuid.uuid4().hex
    listed = vins(2) + ["1HGCM82603B0000I0"]  # one VIN the service refuses: the whole batch is refused
    pending_entry(store, tmp_path, "r0", key, listed, datetime.now(timezone.utc) - timedelta(hours=1))
    outcome = run(store, "r1", [], settings(), tmp_path)
    assert sandbox.count(SUBMIT, status=400) == 1 and outcome.failed == 3
    assert store.sql("SELECT status FROM recall_batches").rows() == [("failed",)]
    assert store.sql("SELECT count(*) FROM failures WHERE dataset = 'recalls'").item() == 3
    run(store, "r2", [], settings(), tmp_path)
    assert sandbox.count(SUBMIT) == 1  # not submitted again


def test_a_batch_size_over_the_limit_is_refused_before_any_entry(store, sandbox, settings, tmp_path):
    with pytest.raises(ValueError, match="10,000"):
        run(store, "r1", vins(3), settings(), tmp_path, batch_size=MAX_BATCH_VINS + 1)
    assert sandbox.count() == 0 and store.sql("SELECT count(*) FROM recall_batches").item() == 0


@pytest.mark.parametrize("original_recorded", [False, True])
def test_a_replayed_submit_is_recorded_as_billed_once(original_recorded, store, sandbox, settings, tmp_path):
    """A run submitted a batch and died before its ledger said so; the next run resubmits with the same key."""
    key, listed = uuid.uuid4().hex, vins(4)
    killed_at = datetime.now(timezone.utc) - timedelta(minutes=10)
    pending_entry(store, tmp_path, "r0", key, listed, killed_at)
    seen = []

    async def submit():
        async with AsyncVehicleDataClient(settings(), on_call=seen.append) as client:
            return await client.submit_recalls_batch(listed, idempotency_key=key)

    job = asyncio.run(submit())
    assert [c.units for c in seen] == [4] and sandbox.units(KEY, "recalls") == 4
    if original_recorded:  # its record made it to the database (only the ledger update did not)
        store.land("api_calls", staging.api_calls_frame([("original", seen[0], killed_at, job.batchId)]), "r0")

    outcome = run(store, "r1", [], settings(), tmp_path)
    assert sandbox.count(SUBMIT) == 2 and sandbox.units(KEY, "recalls") == 4  # billed once
    assert outcome.checked == 4 and outcome.units == 0  # the resuming run spent nothing
    replay = store.sql("SELECT units, replayed, run_id FROM api_calls WHERE endpoint = $e AND run_id = 'r1'", {"e": SUBMIT})
    assert replay.rows() == [(0, True, "r1")]
    # Recorded as spent = billed: the original submit is on record once, under the run that made it.
    assert store.sql("SELECT sum(units) FROM api_calls").item() == sandbox.units(KEY)
    assert store.sql("SELECT run_id, units FROM api_calls WHERE endpoint = $e AND NOT replayed", {"e": SUBMIT}).rows() \
        == [("r0", 4)]


def test_a_replay_after_an_unanswered_attempt_bills_that_attempt(store):
    """The service took attempt 1 but its answer was lost; attempt 2 is the replay. Only the records change."""
    from fleet_data.connectors.calls import CallRecord
    from fleet_data.connectors.models import BatchJob
    from fleet_data.tasks.recalls.batches import _bill_first_acceptance

    at = datetime.now(timezone.utc)
    call = dict(endpoint="recalls-batch-submit", method="POST", path=SUBMIT, vin=None, latency_ms=5.0, will_retry=False)
    lost = CallRecord(status=None, attempt=1, units=0, error="APITimeoutError", **{**call, "will_retry": True})
    replay = CallRecord(status=202, attempt=2, units=0, error=None, replayed=True, **call)
    job = BatchJob(batchId="b1", status="uploading", totalVins=7)
    records = _bill_first_acceptance(store, [("c1", lost, at, "pending:k"), ("c2", replay, at, "pending:k")], job, "k",
                                     ("r1", None))
    assert [(cid, r.units, r.replayed) for cid, r, _, _ in records] == [("c1", 7, False), ("c2", 0, True)]
    assert store.sql("SELECT count(*) FROM api_calls").item() == 0  # nothing recorded beside the call's own


def test_a_submit_without_an_answer_stays_pending_for_the_next_run(store, tmp_path):
    """A dropped connection at submit (no HTTP status at all) keeps the entry and its key: maybe it went through."""
    from fleet_data.connectors import RetryPolicy, Settings
    from fleet_data.connectors.sandbox import FaultConfig, SandboxConfig, run_sandbox

    due = vins(2)
    with run_sandbox(SandboxConfig(faults=FaultConfig(drop_rate=1.0))) as dropping:
        settings = Settings(api_key=KEY, base_url=dropping.url, retry=RetryPolicy(max_retries=0))
        outcome = run(store, "r1", due, settings, tmp_path)
    assert (outcome.pending, outcome.failed, outcome.submitted) == (2, 0, 0)
    assert outcome.stop_reason is not None and outcome.stop_reason.startswith("submit failed: ")
    assert store.sql("SELECT count(*) FROM failures").item() == 0
    assert store.query("unfinished_recall_batches").height == 1  # resubmitted, with the same key, next run


def test_a_batch_whose_results_never_came_stores_no_made_up_answer(store, sandbox, settings, tmp_path):
    """The results call refused: its VINs fail (retryable, due next run) and `raw_responses` holds no answer for it.

    (It once stored `{job, results: []}` built from the status read, as if the service had sent it.)"""
    sandbox.set_faults(FaultConfig(rate=1.0, statuses=[400], endpoints=[RESULTS]))
    due = vins(3)
    outcome = run(store, "r1", due, settings(), tmp_path)
    assert sandbox.count(RESULTS, status=400) == 1 and (outcome.checked, outcome.failed) == (0, 3)
    assert store.sql("SELECT count(*) FROM raw_responses").item() == 0
    assert store.sql("SELECT count(*) FROM recall_checks").item() == 0
    assert store.sql("SELECT vin, retryable FROM failures ORDER BY vin").rows() == [(v, True) for v in sorted(due)]
    assert store.sql("SELECT status FROM recall_batches").rows() == [("completed",)]


def test_a_batchs_results_land_as_the_service_sent_them(store, sandbox, settings, tmp_path):
    """Checks, freshness and the raw answer come from the answer's bytes (shredded in SQL): the stored body is the
    service's, envelope and all, and gives back the checks landed."""
    due = vins(5)
    outcome = run(store, "r1", due, settings(), tmp_path)
    assert outcome.checked == 5
    (body,) = store.sql("SELECT body FROM raw_responses WHERE endpoint = $e", {"e": RESULTS}).rows()[0]
    sent = json.loads(body)
    assert sent["success"] is True and sorted(i["vin"] for i in sent["data"]["results"]) == sorted(due)
    checks = store.sql("SELECT vin, has_recalls, recall_count FROM recall_checks ORDER BY vin").rows()
    assert checks == sorted((i["vin"], i["hasRecalls"], i["recallCount"]) for i in sent["data"]["results"])
    assert store.sql("SELECT count(*) FROM fetch_status WHERE dataset = 'recalls'").item() == 5
