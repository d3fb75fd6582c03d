"""Recall checks through the batch API: submit, poll, land, never paying twice.

The ledger (`recall_batches`) is written *before* each submit, with the
idempotency key the submit will carry. A crash anywhere therefore leaves one of:
a `pending:<key>` entry (resubmitted with the same key: the service replays the
first answer for free), or a real batch id (polled, never resubmitted).
A submit the service refuses for good (a 4xx) ends its entry as `refused:<key>`,
status `failed`, and its VINs go to `failures`: due again next run, never stuck.
A replayed answer (`Idempotent-Replayed: true`) is recorded as 0 units; when the
first, billed answer was never recorded (its run died first), it is recorded then.

Every call (submit, status, results) is also journalled before it is sent, with its batch
(tasks/staging/journal.py, `BatchOptions.journals`): a kill while one is in flight leaves it in
the ledger as `unknown`, with what it may cost (a submit: a unit per VIN), and a call answered but
not landed yet lands from the journal. A replay proves the first acceptance was billed: the
submit's attempts left unknown are then settled as known.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import polars as pl
import pyarrow as pa

from fleet_data.connectors import ENDPOINTS, AsyncVehicleDataClient, CallRecord
from fleet_data.connectors.calls import CallIntent
from fleet_data.connectors import errors as e
from fleet_data.connectors.client import BatchPolling
from fleet_data.connectors.models import BatchJob, BatchStatus
from fleet_data.connectors.retry import CallAttempts
from fleet_data.connectors.webhooks import BatchWebhookReceiver

from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.fetch.scheduler import Job, Scheduler
from fleet_data.tasks.control.stops import STOPPING_ERRORS, Pass
from fleet_data.tasks.control.failpoints import failpoint
from fleet_data.tasks.land.shred import shred_batch_results
from fleet_data.tasks.staging.journal import BATCH_CALLS, AnswerJournal
from fleet_data.tasks.store.database import Database
from fleet_data.tasks.settings import MAX_BATCH_VINS  # the spec's limit per recalls batch, declared with the option

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
    leave: Pass | None = None  # the call in progress's leave to start (tasks/control/stops.py)
    journal: AnswerJournal | None = None  # the run's journal of batch calls, if it keeps one

    def __call__(self, record: CallRecord) -> None:
        call = (record.call_id or uuid.uuid4().hex, record, _now(), self.batch_id)
        self.rows.append(call)
        if self.journal is not None:
            self.journal.attempt(call)
        if self.leave is not None:
            self.leave.answered(record.status)

    def sending(self, intent: CallIntent) -> None:
        if self.journal is not None:
            self.journal.sent(intent, _now(), self.batch_id)

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


@dataclass(frozen=True)
class BatchOptions:
    """Where batches' VIN lists are kept (they outlive a run), how many VINs a batch holds, how its end is learnt:
    a webhook the service calls (`webhook_url`, received at `webhook_listen` when given), else polling."""

    folder: Path
    size: int = MAX_BATCH_VINS
    webhook_url: str | None = None
    webhook_listen: str | None = None
    poll_interval: float = 1.0
    journals: Path | None = None  # where the batch calls are journalled before they are sent (the run's answers)


@dataclass
class _Watch:
    """How this run learns that a batch has finished: the receiver of its webhook, if any, and the poll interval."""

    webhooks: BatchWebhookReceiver | None
    webhook_url: str | None
    notify_url: str | None
    poll_interval: float


async def run_recall_batches(
    db: Database,
    run_id: str,
    due_vins: list[str],
    *,
    calls: Calls,
    batches: BatchOptions,
    on_landed: Callable[[str], None] | None = None,
) -> RecallOutcome:
    """Submit, poll and land every batch, side by side through the scheduler (tasks/fetch/scheduler.py).

    Each step of a batch (submit, one status read, results) is one job: a retryable failure goes back
    to the queue with its not-before time (a retried submit keeps its Idempotency-Key), and so does
    the pause between two status reads, so a batch waiting out a Retry-After holds up no other.
    `on_landed(batch_id)` is told as each batch's results land (its campaign details may start).
    """
    options = batches
    if not 1 <= options.size <= MAX_BATCH_VINS:
        raise ValueError(f"a recall batch holds 1 to {MAX_BATCH_VINS:,} VINs (the service's limit), not {options.size:,}")
    outcome = RecallOutcome()
    stops = calls.stops
    todo_batches = _batches_to_run(db, due_vins, options, outcome)
    journal = (AnswerJournal.create(options.journals, run_id, BATCH_CALLS, secrets=(calls.settings.api_key or "",))
               if options.journals and todo_batches else None)
    for batch in todo_batches:
        batch.calls.journal = journal
    async with contextlib.AsyncExitStack() as stack:
        if journal is not None:
            stack.callback(journal.close)  # kept if the batches end early: the next run lands what the store lacks
        client = await stack.enter_async_context(AsyncVehicleDataClient(
            calls.settings, on_call=_to_batch, on_send=_sending, interrupt=lambda: stops.stopping(API)))
        webhooks = None
        webhook_url = notify_url = options.webhook_url
        if options.webhook_listen:
            # Wait for the service's notification instead of polling (polling stays as a slow fallback).
            # The service gets the URL with this run's secret token; the ledger keeps it without.
            host, _, port = options.webhook_listen.rpartition(":")
            webhooks = await stack.enter_async_context(BatchWebhookReceiver(host or "127.0.0.1", int(port or 0)))
            webhook_url = webhook_url or webhooks.url
            notify_url = webhooks.notify_url(webhook_url)
        scheduler: Scheduler[_Batch] = Scheduler(stops, API, "recalls-batch-status",
                                                 slots=min(MAX_BATCHES_IN_FLIGHT, len(todo_batches)))
        watch = _Watch(webhooks, webhook_url, notify_url, options.poll_interval)
        steps = _Steps(db, run_id, client, scheduler, outcome, calls, watch, on_landed)
        scheduler.add(Job(b, CallAttempts(idempotency_key=b.key if b.step == "submit" else None)) for b in todo_batches)
        await scheduler.run(steps.attempt, steps.stopped)
    if journal is not None:
        journal.delete()  # every call it holds has landed with its batch's step
    return outcome


def _batches_to_run(db: Database, due_vins: list[str], options: BatchOptions, outcome: RecallOutcome) -> list[_Batch]:
    """1. Entries an interrupted run left behind: pending ones are resubmitted with their key, the rest
    polled (an earlier run's webhook receiver is gone). 2. New batches for what is due, each written
    to the ledger just before its first submit."""
    batch_size, batches_dir = options.size, options.folder
    batches_dir.mkdir(parents=True, exist_ok=True)
    unfinished = db.query("unfinished_recall_batches").to_dicts()
    _drop_orphaned_vin_lists(batches_dir, unfinished)
    in_flight = {vin for entry in unfinished for vin in _chunk_vins(entry)}
    todo = [v for v in due_vins if v not in in_flight]
    outcome.resumed = len(unfinished)

    todo_batches: list[_Batch] = []
    for entry in unfinished:
        batch = _Batch(_chunk_vins(entry), entry["idempotency_key"], entry["vins_chunk"],
                       origin=(entry["run_id"], entry["fetched_at"]), entered=True)
        if not entry["batch_id"].startswith("pending:"):
            batch.step, batch.job = "status", BatchJob(batchId=entry["batch_id"], status=entry["status"])
        todo_batches.append(batch)
    for start in range(0, len(todo), batch_size):
        key = uuid.uuid4().hex
        todo_batches.append(_Batch(todo[start : start + batch_size], key, str(batches_dir / f"{key}.parquet")))

    return todo_batches


MAX_BATCHES_IN_FLIGHT = 4  # batch calls in flight at once: each carries up to 10,000 VINs (32 timed out here)
WEBHOOK_LOOK = 1.0  # seconds between two looks for a batch's webhook delivery (no call is made)
_calls_of: ContextVar[_Calls | None] = ContextVar("recall_batch_calls", default=None)


def _to_batch(record: CallRecord) -> None:
    """The client's call observer: the record goes to the batch whose step is running in this task."""
    calls = _calls_of.get()
    if calls is not None:
        calls(record)


def _sending(intent: CallIntent) -> None:
    """The client's sender hook: journalled, with its batch, before the call goes out."""
    calls = _calls_of.get()
    if calls is not None:
        calls.sending(intent)


@dataclass(eq=False)
class _Batch:
    """One ledger entry on its way: its VINs, idempotency key and VIN list, and its next step."""

    vins: list[str]
    key: str
    chunk: str
    origin: tuple[str, Any] | None = None  # (run, time) of the run that wrote a resumed entry
    entered: bool = False  # its `pending:<key>` entry is in the ledger
    step: str = "submit"  # submit -> status (again after each pause) -> results
    job: BatchJob | None = None  # the last status read
    reserved: bool = False  # its units are held in the budget until the submit is answered
    notified: bool = False  # its webhook is awaited here
    polling: BatchPolling | None = None
    read_by: float = 0.0  # with a webhook: when the status is read anyway (a delivery may be lost)
    calls: _Calls = field(default_factory=_Calls)


class _Steps:
    """The steps of a run's batches, as the scheduler's `attempt` and `stopped`."""

    def __init__(self, db, run_id, client, scheduler, outcome, calls: Calls, watch: _Watch, on_landed) -> None:  # noqa: ANN001
        self.db, self.run_id, self.client, self.scheduler, self.outcome = db, run_id, client, scheduler, outcome
        self.stops, self.budget, self.on_progress, self.on_landed = calls.stops, calls.budget, calls.on_progress, on_landed
        self.webhooks, self.webhook_url = watch.webhooks, watch.webhook_url
        self.notify_url, self.poll_interval = watch.notify_url, watch.poll_interval

    async def attempt(self, job: Job[_Batch], leave: Pass) -> None:
        batch = job.item
        token = _calls_of.set(batch.calls)
        batch.calls.hold(leave)
        try:
            if batch.step == "submit":
                await self._submit(batch)
            elif batch.step == "status":
                await self._status(batch)
            else:
                await self._results(batch)
        finally:  # a `RetryLater` passes through to the scheduler: the same step, later
            batch.calls.hold(None)
            _calls_of.reset(token)

    def stopped(self, job: Job[_Batch], reason: str) -> None:
        batch = job.item
        if batch.reserved:
            batch.reserved = False
            self.budget.settle(len(batch.vins), 0)
        self._pending(batch, reason)

    def _next(self, batch: _Batch, step: str, after: float = 0.0) -> None:
        batch.step = step
        self.scheduler.add([Job(batch, not_before=time.monotonic() + after if after else 0.0)])

    async def _submit(self, batch: _Batch) -> None:
        outcome, key = self.outcome, batch.key
        if not batch.entered:  # recorded in the ledger before it is sent
            if outcome.stop_reason or not self.budget.reserve(len(batch.vins)):
                outcome.stop_reason = outcome.stop_reason or "max-units reached"
                outcome.pending += len(batch.vins)
                return
            batch.reserved = True
            pl.DataFrame({"vin": batch.vins}).write_parquet(batch.chunk)
            self.db.land("recall_batches", _ledger_row(None, batch_id=f"pending:{key}", status="submitting",
                                                       idempotency_key=key, vins_count=len(batch.vins),
                                                       vins_chunk=batch.chunk, webhook_url=self.webhook_url), self.run_id)
            batch.entered = True
        batch.calls.batch_id = f"pending:{key}"  # calls made before a batch id is known are filed under the entry
        try:
            job = await self.client.submit_recalls_batch(batch.vins, idempotency_key=key,
                                                         webhook_url=self.notify_url or self.webhook_url)
        except STOPPING_ERRORS as exc:
            self.stopped(Job(batch), self.stops.refuse(API, exc))
            return
        except e.VehicleDataError as exc:
            status = getattr(exc, "status", None)  # none when no answer came (a dropped connection, a timeout)
            if batch.reserved:
                batch.reserved = False
                self.budget.settle(len(batch.vins), 0)
            if status is not None and 400 <= status < 500:
                # Refused for good: the same request would be refused again. End the entry, fail its VINs.
                _refuse(self.db, self.run_id, batch.calls, batch.vins, key, batch.chunk, exc, outcome)
                return
            # Maybe accepted, maybe not: the ledger keeps the pending entry and its key, and the next run
            # resubmits it (free if it went through).
            self._pending(batch, self.stops.reason(API) or f"submit failed: {exc}")
            return
        failpoint("batch_submitted")  # crash tests: the service has the batch, the ledger has only `pending:<key>`
        if batch.reserved:
            batch.reserved = False
            self.budget.settle(len(batch.vins), job.totalVins or len(batch.vins))
        batch.calls.batch_id = job.batchId
        records = _bill_first_acceptance(self.db, batch.calls.take(), job, key, batch.origin or (self.run_id, None))
        frames = {
            "recall_batches": _ledger_row(job, status=job.status_text, idempotency_key=key,
                                          submitted_at=job.createdAt or _now(), vins_count=len(batch.vins),
                                          vins_chunk=batch.chunk, webhook_url=self.webhook_url),
            "api_calls": staging.api_calls_frame([(cid, r, at, job.batchId) for cid, r, at, _ in records]),
        }
        _count_calls(frames["api_calls"], outcome)
        self.db.land_chunk(frames, self.run_id)
        if batch.origin is None:
            outcome.submitted += 1
            if self.webhooks is not None:  # its delivery may come before its first status read
                self.webhooks.expect(job.batchId)
                batch.notified = True
        batch.job = job
        self._next(batch, "status")

    async def _status(self, batch: _Batch) -> None:
        assert batch.job is not None
        batch_id = batch.job.batchId
        batch.calls.batch_id = batch_id
        if batch.notified and time.monotonic() < batch.read_by and self.webhooks is not None:
            if not await self.webhooks.wait(batch_id, 0.05):  # no delivery yet: look again soon, call nothing
                self._next(batch, "status", min(WEBHOOK_LOOK, batch.read_by - time.monotonic()))
                return
        try:
            done = await self.client.recalls_batch_status(batch_id)
            if not done.status.is_terminal:
                batch.polling = batch.polling or BatchPolling(self.poll_interval)
                pause = batch.polling.next_pause(done, notified=batch.notified)  # TimeoutError: too long
                if batch.notified:
                    batch.read_by = time.monotonic() + pause
                    pause = min(pause, WEBHOOK_LOOK)
                self._next(batch, "status", pause)
                return
        except STOPPING_ERRORS as exc:
            self._pending(batch, self.stops.refuse(API, exc))
            return
        except (e.VehicleDataError, TimeoutError) as exc:
            # Still in the ledger as unfinished: the next run polls it again instead of resubmitting.
            self._pending(batch, self.stops.reason(API) or f"batch {batch_id} not finished: {exc}")
            return
        batch.job = done
        if done.status.has_results or done.status is BatchStatus.FAILED:
            self._next(batch, "results")
        else:
            self._land(batch, done, None)

    async def _results(self, batch: _Batch) -> None:
        assert batch.job is not None
        done, answer = batch.job, None
        try:
            # The job read, the results left in the answer's bytes: they are shredded in SQL as they land.
            job, answer = await self.client.recalls_batch_results_raw(done.batchId)
            done = job.model_copy(update={"status_text": done.status_text})
        except STOPPING_ERRORS as exc:
            self._pending(batch, self.stops.refuse(API, exc))
            return
        except e.VehicleDataError:
            pass  # landed without results: its VINs fail (retryable) and are due again next run
        self._land(batch, done, answer)

    def _land(self, batch: _Batch, done: BatchJob, answer: bytes | None) -> None:
        """Land a batch's results (its answer's bytes, None when it gave none) with the ledger's final status."""
        at = _now()
        batch_id = done.batchId or (batch.job.batchId if batch.job else "")
        shredded = shred_batch_results(answer, batch_id, at) if answer is not None else {}
        checks = shredded.get("recall_checks")
        seen = set(checks.column("vin").to_pylist()) if checks is not None else set()
        missing = [v for v in dict.fromkeys(batch.vins) if v not in seen]
        failures = [{"vin": v, "dataset": "recalls", "status": None,
                     "message": f"batch {batch_id} ended {done.status_text} without a result for this VIN",
                     "retryable": True, "attempts": 1, "fetched_at": at, "endpoint": ENDPOINTS["recalls-batch-results"].path}
                    for v in missing]
        # The checks before the bookkeeping, as a chunk lands (the change feed compares with what is landed); no raw
        # answer when the results call gave none.
        calls = staging.api_calls_frame(batch.calls.take())
        frames: dict[str, pl.DataFrame | pa.Table] = {
            **{table: rows for table, rows in shredded.items() if table != "raw_responses"},
            "failures": staging.failures_frame(failures),
            "recall_batches": _ledger_row(done, batch_id=batch_id, status=done.status_text or done.status.value,
                                          completed_at=done.completedAt or at, processed_vins=len(seen)),
            "api_calls": calls,
            **({"raw_responses": shredded["raw_responses"]} if shredded else {}),
        }
        _count_calls(calls, self.outcome)
        self.db.land_chunk(frames, self.run_id)
        self.outcome.checked += len(seen)
        self.outcome.failed += len(missing)
        Path(batch.chunk).unlink(missing_ok=True)  # landed: the ledger no longer needs the VIN list
        self._done(batch)
        if self.on_landed:
            self.on_landed(batch_id)

    def _pending(self, batch: _Batch, reason: str) -> None:
        """Not finished this run: a `pending:` entry is resubmitted next run, a batch id polled again."""
        self.outcome.stop_reason = self.outcome.stop_reason or reason
        self.outcome.pending += len(batch.vins)
        _land_calls(self.db, self.run_id, batch.calls, self.outcome)
        if batch.job is not None:
            self._done(batch)

    def _done(self, batch: _Batch) -> None:
        if batch.notified and self.webhooks is not None and batch.job is not None:
            self.webhooks.forget(batch.job.batchId)
        if self.on_progress:
            self.on_progress(len(batch.vins))


def _bill_first_acceptance(db, records, job, key, origin):  # noqa: ANN001
    """Make the submit's records say what the service billed: its first acceptance, once.

    A replayed answer costs nothing and proves the first acceptance was billed. Attempts of the submit
    that got no answer were recorded as `unknown` at what they may cost; they are settled now. If an
    earlier run recorded the submit (a killed run's attempt, landed from its journal as unknown), that
    record is settled as the acceptance (`settle_submit_billing`) and this run's attempts cost 0; else the
    first attempt here with no answer was it (the service took it, the reply was lost). With neither,
    the run that wrote the entry died before journalling it: its call is recorded now, under that run
    (`origin`: its id and the entry's time), with an id made from the key (recorded twice, it changes nothing).
    """
    if not records or not records[-1][1].replayed or any(r.units and not r.unknown for _, r, _, _ in records):
        return records
    billed, ids = job.totalVins or 0, [job.batchId, f"pending:{key}"]
    if db.query("submit_units_recorded", batch_ids=ids).item(0, 0):
        db.execute("settle_submit_billing", batch_ids=ids, units=billed)
        return _settled(records, billed, first_billed=False)
    if any(r.status is None for _, r, _, _ in records):
        return _settled(records, billed, first_billed=True)
    replay = records[-1][1]
    first = replace(replay, attempt=1, latency_ms=None, units=billed, error=None, will_retry=False, replayed=False)
    run, at = origin
    frame = staging.api_calls_frame([(f"submit-{key}", first, at or records[0][2], job.batchId)])
    db.land("api_calls", frame, run)
    return records


def _settled(records, billed: int, *, first_billed: bool):  # noqa: ANN001
    """The submit's attempts without an answer as known: the first at `billed` if `first_billed`, the others at 0."""
    settled, owed = [], first_billed
    for cid, record, at, batch in records:
        if record.status is None:
            record = replace(record, units=billed if owed else 0, unknown=False)
            owed = False
        settled.append((cid, record, at, batch))
    return settled


def _refuse(db, run_id, calls, vins, key, chunk_path, exc, outcome) -> None:  # noqa: ANN001
    at = _now()
    reason = f"refused at submit: {exc.status} {exc.message}"
    failures = [{"vin": v, "dataset": "recalls", "status": exc.status, "message": f"recall batch {reason}",
                 "retryable": False, "attempts": 1, "fetched_at": at, "endpoint": ENDPOINTS["recalls-batch-submit"].path}
                for v in dict.fromkeys(vins)]
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
