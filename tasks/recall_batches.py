"""Recall checks through the batch API: submit, poll, land, never paying twice.

The ledger (`recall_batches`) is written *before* each submit, with the
idempotency key the submit will carry. A crash anywhere therefore leaves one of:
a `pending:<key>` entry (resubmitted with the same key: the service replays the
first answer for free), or a real batch id (polled, never resubmitted).
A submit the service refuses for good (a 4xx) ends its entry as `refused:<key>`,
status `failed`, and its VINs go to `failures`: due again next run, never stuck.
A replayed answer (`Idempotent-Replayed: true`) is recorded as 0 units; when the
first, billed answer was never recorded (its run died first), it is recorded then.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import polars as pl

from connectors import ENDPOINTS, AsyncVehicleDataClient, CallRecord, Settings
from connectors import errors as e
from connectors.models import BatchJob, BatchStatus
from connectors.webhooks import BatchWebhookReceiver

from . import staging
from .enrich import Budget
from .stops import STOPPING_ERRORS, Pass, Stopped, Stops
from .failpoints import failpoint
from .landing import fetch_status_frame
from .storage import Database

MAX_BATCH_VINS = 10_000  # the spec's limit per recalls batch

LEDGER_SCHEMA: staging.Schema = {
    "batch_id": pl.String, "numeric_batch_id": pl.Int64, "status": pl.String, "idempotency_key": pl.String,
    "submitted_at": staging.TS, "completed_at": staging.TS, "total_vins": pl.Int32, "processed_vins": pl.Int32,
    "vins_count": pl.Int32, "vins_chunk": pl.String, "webhook_url": pl.String, "message": pl.String,
    "fetched_at": staging.TS,
}
API = ENDPOINTS["recalls-batch-submit"].api  # submit, status and results share the recalls quota


@dataclass
class RecallOutcome:
    checked: int = 0  # VINs with a landed recall check
    failed: int = 0
    pending: int = 0
    submitted: int = 0  # batches submitted this run
    resumed: int = 0  # batches from an earlier, interrupted run picked up again
    units: int = 0
    calls: int = 0
    stop_reason: str | None = None


@dataclass
class _Calls:
    """Collects the client's call records, tagged with the batch they were about."""

    batch_id: str | None = None
    rows: list[tuple[str, CallRecord, datetime, str | None]] = field(default_factory=list)
    leave: Pass | None = None  # the call in progress's leave to start (tasks/stops.py)

    def __call__(self, record: CallRecord) -> None:
        self.rows.append((uuid.uuid4().hex, record, _now(), self.batch_id))
        if self.leave is not None:
            self.leave.answered(record.status)

    def hold(self, leave: Pass | None) -> None:
        self.leave = leave

    def take(self) -> list[tuple[str, CallRecord, datetime, str | None]]:
        rows, self.rows = self.rows, []
        return rows


def _ledger_row(job: BatchJob | None, **values: Any) -> pl.DataFrame:
    row: dict[str, Any] = {k: None for k in LEDGER_SCHEMA} | {"fetched_at": _now()}
    if job is not None:
        row |= {"batch_id": job.batchId, "numeric_batch_id": job.numericBatchId, "status": job.status_text,
                "total_vins": job.totalVins, "processed_vins": job.processedVins, "completed_at": job.completedAt}
    row |= values
    return pl.DataFrame([row], schema=LEDGER_SCHEMA, orient="row")


async def run_recall_batches(
    db: Database,
    run_id: str,
    due_vins: list[str],
    *,
    settings: Settings,
    batches_dir: Path,
    batch_size: int = 10_000,
    webhook_url: str | None = None,
    webhook_listen: str | None = None,
    poll_interval: float = 1.0,
    budget: Budget | None = None,
    stops: Stops | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> RecallOutcome:
    if not 1 <= batch_size <= MAX_BATCH_VINS:
        raise ValueError(f"a recall batch holds 1 to {MAX_BATCH_VINS:,} VINs (the service's limit), not {batch_size:,}")
    outcome = RecallOutcome()
    budget = budget or Budget(None)
    stops = stops or Stops()
    calls = _Calls()
    batches_dir.mkdir(parents=True, exist_ok=True)
    unfinished = db.query("unfinished_recall_batches").to_dicts()
    _drop_orphaned_vin_lists(batches_dir, unfinished)
    in_flight = {vin for entry in unfinished for vin in _chunk_vins(entry)}
    todo = [v for v in due_vins if v not in in_flight]
    outcome.resumed = len(unfinished)

    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(AsyncVehicleDataClient(settings, on_call=calls,
                                                                         interrupt=lambda: stops.stopping(API)))
        webhooks = None
        notify_url = webhook_url
        if webhook_listen:
            # Wait for the service's notification instead of polling (polling stays as a slow fallback).
            # The service gets the URL with this run's secret token; the ledger keeps it without.
            host, _, port = webhook_listen.rpartition(":")
            webhooks = await stack.enter_async_context(BatchWebhookReceiver(host or "127.0.0.1", int(port or 0)))
            webhook_url = webhook_url or webhooks.url
            notify_url = webhooks.notify_url(webhook_url)
        to_poll: list[tuple[BatchJob, list[str], str, bool]] = []  # job, VINs, VIN list file, notified here
        # 1. Entries an interrupted run left behind: resubmit pending ones with their key; poll the rest.
        for entry in unfinished:
            vins = _chunk_vins(entry)
            if entry["batch_id"].startswith("pending:"):
                job = await _submit(db, run_id, client, calls, vins, entry["idempotency_key"], entry["vins_chunk"], webhook_url,
                                    outcome, stops, notify_url, origin=(entry["run_id"], entry["fetched_at"]))
            else:
                job = BatchJob(batchId=entry["batch_id"], status=entry["status"])
            if job is not None:  # an earlier run's receiver is gone: these are polled
                to_poll.append((job, vins, entry["vins_chunk"], False))  # else counted pending or failed by _submit
        # 2. New batches for what is due, each recorded in the ledger before it is sent.
        for start in range(0, len(todo), batch_size):
            vins = todo[start : start + batch_size]
            if outcome.stop_reason or stops.reason(API) or not budget.reserve(len(vins)):
                outcome.stop_reason = outcome.stop_reason or stops.reason(API) or "max-units reached"
                outcome.pending += len(todo) - start
                break
            key = uuid.uuid4().hex
            chunk_path = batches_dir / f"{key}.parquet"
            pl.DataFrame({"vin": vins}).write_parquet(chunk_path)
            db.land("recall_batches", _ledger_row(None, batch_id=f"pending:{key}", status="submitting",
                                                  idempotency_key=key, vins_count=len(vins), vins_chunk=str(chunk_path),
                                                  webhook_url=webhook_url), run_id)
            job = await _submit(db, run_id, client, calls, vins, key, str(chunk_path), webhook_url, outcome, stops, notify_url)
            budget.settle(len(vins), job.totalVins or len(vins) if job else 0)
            if job is None:  # counted pending or failed by _submit
                continue
            outcome.submitted += 1
            if webhooks is not None:
                webhooks.expect(job.batchId)  # its delivery may come before its turn to be waited for
            to_poll.append((job, vins, str(chunk_path), webhooks is not None))
        # 3. Poll each batch to the end and land its results with the ledger's final status.
        for job, vins, chunk_file, notified in to_poll:
            calls.batch_id = job.batchId
            if await _finish(db, run_id, client, calls, job, vins, poll_interval, outcome, stops, webhooks if notified else None):
                Path(chunk_file).unlink(missing_ok=True)  # landed: the ledger no longer needs the VIN list
            if notified and webhooks is not None:
                webhooks.forget(job.batchId)
            if on_progress:
                on_progress(len(vins))
    return outcome


async def _submit(db, run_id, client, calls, vins, key, chunk_path, webhook_url, outcome, stops,  # noqa: ANN001
                  notify_url=None, origin=None) -> BatchJob | None:
    """Submit one ledger entry's VINs. `origin`: (run, time) of the run that wrote the entry, when resuming it."""
    calls.batch_id = f"pending:{key}"  # calls made before a batch id is known are filed under the entry
    try:
        job = await stops.call(API, lambda: client.submit_recalls_batch(vins, idempotency_key=key,
                                                                        webhook_url=notify_url or webhook_url),
                               calls.hold)
    except (*STOPPING_ERRORS, Stopped) as exc:
        outcome.stop_reason = _stop_reason(exc)
        outcome.pending += len(vins)
        _land_calls(db, run_id, calls, outcome)
        return None
    except e.VehicleDataError as exc:
        status = getattr(exc, "status", None)  # none when no answer came (a dropped connection, a timeout)
        if status is not None and 400 <= status < 500:
            # Refused for good: the same request would be refused again. End the entry, fail its VINs.
            _refuse(db, run_id, calls, vins, key, chunk_path, exc, outcome)
            return None
        # Maybe accepted, maybe not: the ledger keeps the pending entry and its key, and the next run
        # resubmits it (free if it went through).
        outcome.stop_reason = outcome.stop_reason or stops.reason(API) or f"submit failed: {exc}"
        outcome.pending += len(vins)
        _land_calls(db, run_id, calls, outcome)
        return None
    failpoint("batch_submitted")  # crash tests: the service has the batch, the ledger has only `pending:<key>`
    calls.batch_id = job.batchId
    records = _bill_first_acceptance(db, calls.take(), job, key, origin or (run_id, None))
    frames = {
        "recall_batches": _ledger_row(job, status=job.status_text, idempotency_key=key, submitted_at=job.createdAt or _now(),
                                      vins_count=len(vins), vins_chunk=chunk_path, webhook_url=webhook_url),
        "api_calls": staging.api_calls_frame([(cid, r, at, job.batchId) for cid, r, at, _ in records]),
    }
    _count_calls(frames["api_calls"], outcome)
    db.land_chunk(frames, run_id)
    return job


def _bill_first_acceptance(db, records, job, key, origin):  # noqa: ANN001
    """Make the submit's records say what the service billed: its first acceptance, once.

    A replayed answer costs nothing. If no record holds what the first acceptance cost, it is
    an attempt of this call that got no answer (the service took it, the reply was lost), or a
    call of the run that wrote the entry and died before recording it: that call is recorded
    now, under that run (`origin`: its id and the entry's time), with an id made from the key
    (so recording it twice changes nothing).
    """
    if not records or not records[-1][1].replayed or any(r.units for _, r, _, _ in records):
        return records
    billed = job.totalVins or 0
    lost = next((i for i, (_, r, _, _) in enumerate(records) if r.status is None), None)
    if lost is not None:
        cid, record, at, batch = records[lost]
        return [*records[:lost], (cid, replace(record, units=billed), at, batch), *records[lost + 1:]]
    recorded = db.query("submit_units_recorded", batch_ids=[job.batchId, f"pending:{key}"]).item(0, 0)
    if not recorded:
        replay = records[-1][1]
        first = replace(replay, attempt=1, latency_ms=None, units=billed, error=None, will_retry=False, replayed=False)
        run, at = origin
        frame = staging.api_calls_frame([(f"submit-{key}", first, at or records[0][2], job.batchId)])
        db.land("api_calls", frame, run)
    return records


def _refuse(db, run_id, calls, vins, key, chunk_path, exc, outcome) -> None:  # noqa: ANN001
    at = _now()
    reason = f"refused at submit: {exc.status} {exc.message}"
    failures = [{"vin": v, "dataset": "recalls", "status": exc.status, "message": f"recall batch {reason}",
                 "retryable": False, "attempts": 1, "fetched_at": at} for v in dict.fromkeys(vins)]
    frames = {
        # `refused:<key>` replaces the `pending:<key>` entry (same idempotency key): no run resubmits it.
        "recall_batches": _ledger_row(None, batch_id=f"refused:{key}", status="failed", idempotency_key=key,
                                      vins_count=len(vins), completed_at=at, message=reason, fetched_at=at),
        "failures": staging.failures_frame(failures),
        "api_calls": staging.api_calls_frame(calls.take()),
    }
    _count_calls(frames["api_calls"], outcome)
    db.land_chunk(frames, run_id)
    if chunk_path:
        Path(chunk_path).unlink(missing_ok=True)
    outcome.failed += len(failures)


async def _finish(db, run_id, client, calls, job, vins, poll_interval, outcome, stops, webhooks=None) -> bool:  # noqa: ANN001
    """Poll a batch to its end and land its results; False when it must be resumed later."""
    try:
        done = await _wait_for_batch(client, calls, stops, job.batchId, poll_interval, webhooks)
        items = []
        if done.status.has_results or done.status is BatchStatus.FAILED:
            try:
                results = await stops.call(API, lambda: client.recalls_batch_results(job.batchId), calls.hold)
                items, done = results.data.results, results.data.job.model_copy(update={"status_text": done.status_text})
            except e.VehicleDataError as exc:
                if isinstance(exc, STOPPING_ERRORS):
                    raise
                items = []
    except (*STOPPING_ERRORS, Stopped) as exc:
        outcome.stop_reason = _stop_reason(exc)
        outcome.pending += len(vins)
        _land_calls(db, run_id, calls, outcome)
        return False
    except (e.VehicleDataError, TimeoutError) as exc:
        # Still in the ledger as unfinished: the next run polls it again instead of resubmitting.
        outcome.stop_reason = outcome.stop_reason or stops.reason(API) or f"batch {job.batchId} not finished: {exc}"
        outcome.pending += len(vins)
        _land_calls(db, run_id, calls, outcome)
        return False
    at = _now()
    seen = {i.vin for i in items}
    missing = [v for v in dict.fromkeys(vins) if v not in seen]
    failures = [{"vin": v, "dataset": "recalls", "status": None, "message": f"batch {job.batchId} ended {done.status_text} without a result for this VIN",
                 "retryable": True, "attempts": 1, "fetched_at": at} for v in missing]
    frames = {
        "recall_checks": staging.recall_checks_from_batch(items, job.batchId, at),
        "fetch_status": fetch_status_frame("recalls", [(i.vin, at) for i in items], []),
        "failures": staging.failures_frame(failures),
        "recall_batches": _ledger_row(done, batch_id=job.batchId, status=done.status_text or done.status.value,
                                      completed_at=done.completedAt or at, processed_vins=len(items)),
        "api_calls": staging.api_calls_frame(calls.take()),
        "raw_responses": staging.raw_responses_frame([{
            "dataset": "recalls", "vin": None, "batch_id": job.batchId, "endpoint": "recalls-batch-results",
            "request_params": {"batchId": job.batchId}, "status": 200,
            "body": {"job": done.model_dump(mode="json", exclude={"batchToken"}), "results": [i.model_dump() for i in items]},
            "fetched_at": at}]),
    }
    _count_calls(frames["api_calls"], outcome)
    db.land_chunk(frames, run_id)
    outcome.checked += len(items)
    outcome.failed += len(missing)
    return True


async def _wait_for_batch(client, calls, stops, batch_id, poll_interval, webhooks, *, timeout: float = 3600.0,  # noqa: ANN001
                          max_interval: float = 30.0, webhook_fallback: float = 60.0) -> BatchJob:
    """Read the status until the batch ends: with growing pauses, or when its webhook arrives (and once a
    minute in case a delivery is lost). Each read asks the run's stops first, like every other call."""
    deadline = time.monotonic() + timeout
    interval = poll_interval
    while True:
        job = await stops.call(API, lambda: client.recalls_batch_status(batch_id), calls.hold)
        if job.status.is_terminal:
            return job
        pause = webhook_fallback if webhooks is not None else interval
        if time.monotonic() + min(pause, 1.0) > deadline:
            raise TimeoutError(f"batch {batch_id} still {job.status_text!r} after {timeout:.0f}s")
        # Either wait notices a stop (a cancellation) within a second: the batch is polled again next run.
        if webhooks is not None:
            until = time.monotonic() + min(pause, max(0.0, deadline - time.monotonic()))
            while not stops.stopping(API) and time.monotonic() < until:
                if await webhooks.wait(batch_id, min(1.0, max(0.0, until - time.monotonic()))):
                    break
        else:
            await stops.pause(interval, API)
            interval = min(max_interval, interval * 1.5)
        if stops.stopping(API):
            raise Stopped(stops.reason(API) or "stopped")


def _stop_reason(exc: Exception) -> str:
    return exc.reason if isinstance(exc, Stopped) else f"{exc.status} {exc.message}"  # type: ignore[attr-defined]


def _land_calls(db: Database, run_id: str, calls: _Calls, outcome: RecallOutcome) -> None:
    frame = staging.api_calls_frame(calls.take())
    _count_calls(frame, outcome)
    db.land_chunk({"api_calls": frame}, run_id)


def _count_calls(frame: pl.DataFrame, outcome: RecallOutcome) -> None:
    outcome.calls += frame.height
    outcome.units += int(frame["units"].sum() or 0)


def _drop_orphaned_vin_lists(batches_dir: Path, unfinished: list[dict[str, Any]]) -> None:
    """Delete VIN lists no unfinished batch names: a kill left them behind.

    A list is written before its `pending:` ledger entry lands and deleted after its results
    land; a kill in either gap leaves a file that no run will ever read. This process holds the
    database, so no other run is writing a list now.
    """
    named = {Path(entry["vins_chunk"]).name for entry in unfinished if entry.get("vins_chunk")}
    for path in batches_dir.glob("*.parquet"):
        if path.name not in named:
            path.unlink(missing_ok=True)


def _chunk_vins(entry: dict[str, Any]) -> list[str]:
    path = entry.get("vins_chunk")
    return pl.read_parquet(path)["vin"].to_list() if path and Path(path).is_file() else []


def _now() -> datetime:
    return datetime.now(timezone.utc)
