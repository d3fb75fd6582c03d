"""Recall batches, their campaign details and plate lookups wait out a Retry-After without holding anything up.

The sandbox answers one call with a 503 and a `Retry-After` of WAIT seconds (a real wait: these tests are
about the order of calls in its journal, not about time; WAIT is long enough for the other calls to be
made on a loaded machine: with 2 s, a busy box sometimes had not finished them). While that call waits in the scheduler's
queue, the other batches are polled and fetched, the details of a batch already landed are looked
up, and other plates are asked for; the waiting call is then sent again and the run ends complete.
"""

from __future__ import annotations

import asyncio

import polars as pl

from fleet_data.connectors.sandbox import FaultConfig
from fleet_data.connectors.sandbox.recalls import open_recalls
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.fetch.plates import look_up_plates

from .conftest import KEY
from .test_plates import sandbox_plate
from .test_recall_batches import run, vins

SUBMIT, STATUS, RESULTS = "/v1/recalls-batch/submit", "/v1/recalls-batch/status", "/v1/recalls-batch/results"
DETAILS, PLATE = "/v1/recalls", "/v2/platedecoder"
WAIT = 6  # seconds of Retry-After


def one_call_waits(sandbox, endpoint: str) -> None:
    """The first call to `endpoint` answers 503 with a WAIT s Retry-After; every other call is served."""
    sandbox.set_faults(FaultConfig(rate=1.0, statuses=[503], retry_after_seconds=WAIT, endpoints=[endpoint], max_faults=1))
    sandbox.record_journal(True)


def around_the_wait(journal: list[dict], endpoint: str) -> tuple[str, list[dict]]:
    """The waiting call's target and the calls answered between its 503 and its retry."""
    failed = next(i for i, c in enumerate(journal) if c["status"] == 503)
    assert journal[failed]["endpoint"] == endpoint
    target = journal[failed]["target"] or journal[failed]["vin"]
    retried = next(i for i, c in enumerate(journal) if i > failed and (c["target"] or c["vin"]) == target)
    assert journal[retried]["endpoint"] == endpoint and journal[retried]["status"] == 200
    return target, journal[failed + 1 : retried]


def test_a_batch_waiting_out_a_retry_after_holds_up_no_other_batch(store, sandbox, settings, tmp_path):
    one_call_waits(sandbox, STATUS)
    outcome = run(store, "r1", vins(9), settings(), tmp_path, batch_size=3)
    assert (outcome.submitted, outcome.checked, outcome.pending, outcome.failed) == (3, 9, 0, 0)
    assert sandbox.count(SUBMIT, status=202) == 3  # each batch submitted once
    journal = [c for c in sandbox.journal() if c["key"] == KEY]
    waiting, meanwhile = around_the_wait(journal, STATUS)
    others = {c["target"] for c in meanwhile if c["endpoint"] == RESULTS}
    batches = {r[0] for r in store.sql("SELECT batch_id FROM recall_batches").rows()}
    assert others == batches - {waiting} and len(others) == 2  # both other batches finished during the wait
    assert store.sql("SELECT count(*) FROM recall_checks").item() == 9


def test_a_submit_sent_again_after_its_retry_after_is_the_same_request(store, sandbox, settings, tmp_path):
    one_call_waits(sandbox, SUBMIT)
    due = vins(6)
    outcome = run(store, "r1", due, settings(), tmp_path, batch_size=3)
    assert (outcome.submitted, outcome.checked, outcome.pending) == (2, 6, 0)
    submits = [c for c in sandbox.journal() if c["key"] == KEY and c["endpoint"] == SUBMIT]
    assert [c["status"] for c in submits].count(503) == 1 and len(submits) == 3
    ledger = {k for (k,) in store.sql("SELECT idempotency_key FROM recall_batches").rows()}
    assert {c["idempotency_key"] for c in submits} == ledger and len(ledger) == 2  # the retry carried its key
    assert sandbox.units(KEY, "recalls") == 6  # each VIN billed once


def with_recalls(n: int) -> list[str]:
    return [v for v in vins(400, plant="R") if open_recalls(v)][:n]


def test_details_of_a_landed_batch_start_while_another_batch_waits(store, sandbox, settings, tmp_path):
    from fleet_data.tasks.recalls.batches import BatchOptions
    from fleet_data.tasks.recalls.pipeline import check_recalls_and_details

    due = with_recalls(8)
    store.land("vehicles", pl.DataFrame({"vin": due, "unit_number": [f"U{i}" for i in range(len(due))]}), "r1")
    one_call_waits(sandbox, STATUS)
    batches, details = asyncio.run(check_recalls_and_details(
        store, "r1", due, calls=Calls(settings(), concurrency=4), batches=BatchOptions(tmp_path / "b", 4, poll_interval=0.05)))
    assert (batches.submitted, batches.checked, batches.pending) == (2, 8, 0)
    with_counts = store.sql("SELECT count(*) FROM recall_checks WHERE checked_via = 'batch' AND recall_count > 0").item()
    assert with_counts >= 6  # the sandbox's batch answer counts recalls its own way: most of these have some
    assert (details.due, details.by_vin, details.pending, details.failed) == (with_counts, with_counts, 0, 0)
    assert sandbox.count(SUBMIT, status=202) == 2 and sandbox.count(DETAILS) == with_counts  # nothing called twice
    batch_of = dict(store.sql("SELECT vin, batch_id FROM recall_checks WHERE checked_via = 'batch'").rows())
    journal = [c for c in sandbox.journal() if c["key"] == KEY]
    waiting, meanwhile = around_the_wait(journal, STATUS)
    looked_up = [c["vin"] for c in meanwhile if c["endpoint"] == DETAILS]
    assert looked_up and all(batch_of[v] != waiting for v in looked_up)  # the other batch's details, during the wait
    waiting_results = next(i for i, c in enumerate(journal) if c["endpoint"] == RESULTS and c["target"] == waiting)
    first_detail = next(i for i, c in enumerate(journal) if c["endpoint"] == DETAILS)
    assert first_detail < waiting_results  # pipelined: details began before the last batch's results came
    assert store.sql("SELECT count(DISTINCT vin) FROM recalls").item() == with_counts


async def test_a_plate_waiting_out_a_retry_after_does_not_hold_its_slot(sandbox):
    from fleet_data.connectors import Settings

    keys = [("US", "TX", sandbox_plate(True, i * 50)) for i in range(3)]
    sandbox.set_faults(FaultConfig(rate=1.0, statuses=[503], retry_after_seconds=WAIT, endpoints=[PLATE], max_faults=1))
    sandbox.record_journal(True)
    lookups = await look_up_plates(
        keys,
        calls=Calls(settings=Settings(api_key="plates_wait_key", base_url=sandbox.url), concurrency=1),
    )
    assert {r.outcome for r in lookups.results.values()} == {"found"} and len(lookups.results) == 3
    journal = [c for c in sandbox.journal() if c["key"] == "plates_wait_key"]
    waiting, meanwhile = around_the_wait(journal, PLATE)
    assert {c["target"] for c in meanwhile} == {k[2] for k in keys} - {waiting}  # one slot, and it served the others
