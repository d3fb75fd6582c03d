"""Per-VIN enrichment of one chunk: bounded async concurrency, refusal stops, a budget.

Plain async code (no Prefect): the flow wraps `fetch_chunk` in a chunk-sized task.
Every VIN handed in (or adopted from the chunk before) comes back in exactly one list: found,
no_data, failed, pending, or handed_off to the next chunk. Calls go through the scheduler
(tasks/fetch/scheduler.py), which asks the run's `Stops` before each (tasks/control/stops.py): after a
refusal, a cancellation or a pause, no new call starts, and a retry waits without a slot.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import orjson

from fleet_data.connectors import ENDPOINTS, AsyncVehicleDataClient, CallRecord, estimate_units
from fleet_data.connectors.calls import CALL_IDS, CallIntent
from fleet_data.connectors import errors as e

from fleet_data.tasks.datasets import CANADIAN_PROVINCES as CANADIAN_PROVINCES
from fleet_data.tasks.datasets import KM_PER_MILE as KM_PER_MILE
from fleet_data.tasks.datasets import US_STATES as US_STATES
from fleet_data.tasks.datasets import Call as Call
from fleet_data.tasks.datasets import DATASETS as DATASETS
from fleet_data.tasks.datasets import Dataset
from fleet_data.tasks.datasets import valuation_request as valuation_request
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.fetch.scheduler import Job, Scheduler
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.control.stops import STOPPING_ERRORS, Pass

if TYPE_CHECKING:
    from fleet_data.tasks.staging.journal import AnswerJournal
    from fleet_data.tasks.fetch.lanes import Lane

# The declarations live in the registry (tasks/datasets.py); these names stay importable from here.

MAX_UNITS = "max-units reached"
PROGRESS_SECONDS = 0.1  # how often settled VINs are told to the run's progress, at most


async def fetch_chunk(
    dataset: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    calls: Calls,
    journal: AnswerJournal | None = None,
    lane: Lane | None = None,
    follows: bool = False,
) -> ChunkResult:
    """Fetch `dataset` for every row (each has at least `vin`), calling as `calls` allow (tasks/control/calls.py).

    Calls go through the scheduler (tasks/fetch/scheduler.py): a VIN waiting to be retried holds no slot.
    With a `lane` (tasks/fetch/lanes.py), the chunk first adopts the waiting retries the chunk before it
    handed on, and hands its own on when they are all it has left and another chunk is coming
    (`ChunkResult.handed_off`). With a `journal`, every attempt is written to it before it is sent, and
    its outcome (the VIN's final answer, if it settled it) as it arrives, before its slot's next call.
    `follows`: these VINs come from other calls' answers (recall details), so their first attempts do not
    re-open the run's retry window (tasks/control/retry_window.py).
    """
    spec = DATASETS[dataset]
    jobs: list[Job[Mapping[str, Any]]] = [*(lane.adopt() if lane else ()), *(Job(row) for row in rows)]
    api = ENDPOINTS[spec.endpoint].api
    if stopped_before := calls.stops.reason(api, spec.endpoint):  # refused or paused earlier in the run: call nothing
        return ChunkResult(dataset, pending=[j.item["vin"] for j in jobs], stop_reason=stopped_before)
    chunk = _Chunk(spec, dataset, calls, journal, estimate_units(spec.endpoint, spec.request(jobs[0].item) if jobs else {}))
    chunk.scheduler.add(jobs, follows=follows)
    try:
        async with AsyncVehicleDataClient(calls.settings, on_call=chunk.observe,
                                          on_send=chunk.sending if journal is not None else None) as client:  # scheduled: never waits in place
            chunk.client = client
            await chunk.scheduler.run(chunk.attempt, chunk.stopped, hand_off=lane.hand_off if lane else None)
    finally:
        chunk.report()
    for job in chunk.scheduler.handed_off:
        chunk.result.handed_off.append(job.item["vin"])
        chunk.release(job.item["vin"])
    return chunk.result


class _Chunk:
    """One chunk's fetch: the scheduler's `attempt` and `stopped`, the client's call observer, the budget held."""

    def __init__(self, spec: Dataset, dataset: str, calls: Calls, journal: AnswerJournal | None, per_call: int):
        self.spec, self.calls, self.journal, self.per_call = spec, calls, journal, per_call
        self.api = ENDPOINTS[spec.endpoint].api
        self.result = ChunkResult(dataset)
        self.scheduler: Scheduler[Mapping[str, Any]] = Scheduler(calls.stops, self.api, spec.endpoint, slots=calls.concurrency)
        self.client: AsyncVehicleDataClient | None = None
        self.units_by_vin: dict[str, int] = {}
        self.reserved: set[str] = set()  # VINs whose units this chunk holds in the budget
        self.passes: dict[str, Pass] = {}  # VIN -> its attempt's leave to start, until the first answer settles it
        self.settling: dict[str, tuple] = {}  # VIN -> its last call, journalled with the answer it settles
        self._settled = 0  # VINs settled and not yet told to `calls.progress`
        self._told = time.monotonic()

    def sending(self, intent: CallIntent) -> None:
        """Before the attempt goes out: journalled, so a kill while it is in flight leaves it in the ledger."""
        self.journal.sent(intent, _now())  # type: ignore[union-attr]  # given to the client only with a journal

    def observe(self, record: CallRecord) -> None:
        call = (record.call_id or next(CALL_IDS), record, _now(), None)
        self.result.calls.append(call)
        self.calls.stops.observe(record.endpoint, record.status)
        if record.vin:
            self.units_by_vin[record.vin] = self.units_by_vin.get(record.vin, 0) + record.units
            if record.vin in self.passes:
                self.passes[record.vin].answered(record.status)
        if self.journal is not None:
            if record.will_retry or not record.vin:
                self.journal.attempt(call)
            else:
                self.settling[record.vin] = call

    def _answered_at(self, vin: str) -> datetime:
        """When the VIN's answer came: the time its call was recorded at (a moment ago), else now."""
        call = self.settling.get(vin)
        return call[2] if call is not None else _now()

    def settled(self, vin: str, outcome: str, at: datetime, **answer: Any) -> None:
        if self.journal is not None:
            self.journal.answer(self.settling.pop(vin, None), vin, outcome, at, **answer)

    def release(self, vin: str) -> None:
        """This chunk is done with the VIN: its reservation becomes what it spent here."""
        if vin in self.reserved:
            self.reserved.discard(vin)
            self.calls.budget.settle(self.per_call, self.units_by_vin.get(vin, 0))

    def done(self, vin: str) -> None:
        self.release(vin)
        self._settled += 1
        if (now := time.monotonic()) - self._told >= PROGRESS_SECONDS:
            self._told = now
            self.report()

    def report(self) -> None:
        """Tell `calls.progress` the VINs settled since it was last told: a few times a second, not per VIN
        (a terminal's progress bar takes a lock and redraws on each)."""
        if self._settled:
            settled, self._settled = self._settled, 0
            self.calls.progress(settled)

    def stopped(self, job: Job[Mapping[str, Any]], reason: str) -> None:
        self.result.stop_reason = self.result.stop_reason or reason
        self.result.pending.append(job.item["vin"])
        self.done(job.item["vin"])

    async def attempt(self, job: Job[Mapping[str, Any]], leave: Pass) -> None:
        row = job.item
        vin = row["vin"]
        if vin not in self.reserved:
            if not self.calls.budget.reserve(self.per_call):
                self.scheduler.halt(MAX_UNITS)
                self.stopped(job, MAX_UNITS)
                return
            self.reserved.add(vin)
        self.passes[vin] = leave
        try:
            await self._ask(job, vin, row)
        finally:  # a `RetryLater` passes through to the scheduler: not settled, still reserved
            self.passes.pop(vin, None)
            if vin in self.settling:  # no answer settled it (an unexpected error): still a call paid for
                self.journal.attempt(self.settling.pop(vin))  # type: ignore[union-attr]
        self.done(vin)

    async def _ask(self, job: Job[Mapping[str, Any]], vin: str, row: Mapping[str, Any]) -> None:
        spec, result, dataset = self.spec, self.result, self.result.dataset
        assert self.client is not None
        try:
            # The answer as the bytes to stage (redacted by the client), never a model: landing
            # shreds them in SQL (tasks/land/shred.py).
            answered = await self.client.request(spec.endpoint, spec.params(vin, row), raw=True)
            answer = raw_answer(spec, answered.body, answered.raw)
            at = self._answered_at(vin)
            result.found.append((vin, answer, at))
            result.requests[vin] = asked = spec.request(row)
            self.settled(vin, "found", at, body=answer, request=asked)
        except e.NotFoundError as exc:
            if isinstance(exc, (e.FeatureNotEnabledError, e.InvalidRegionError)):
                result.failed.append(failure := _failure(vin, dataset, exc, job.call.attempts))
                self.settled(vin, "failed", failure["fetched_at"], message=exc.message, retryable=exc.retryable)
            else:
                result.no_data.append((vin, at := _now()))  # a stable answer: the VIN is checked
                self.settled(vin, "no_data", at)
        except STOPPING_ERRORS as exc:
            reason = self.calls.stops.refuse(self.api, exc)
            result.stop_reason = result.stop_reason or reason
            result.pending.append(vin)
            self.settled(vin, "pending", _now(), message=f"{exc.status} {exc.message}")
        except e.VehicleDataError as exc:
            result.failed.append(failure := _failure(vin, dataset, exc, job.call.attempts))
            self.settled(vin, "failed", failure["fetched_at"], message=exc.message, retryable=exc.retryable)


def raw_answer(spec: Dataset, body: Any, sent: bytes | None = None) -> bytes:
    """The answer's JSON bytes, once its top-level shape is the one the dataset's model expects.

    `sent`: the bytes the service sent (redacted), kept as they are; else `body` is serialised.
    """
    if not isinstance(body, dict):
        raise e.MalformedResponseError(f"{ENDPOINTS[spec.endpoint].path} answered 200 with a body that is not a JSON object",
                                       endpoint=spec.endpoint, status=200)
    for member, kind in spec.shape.items():
        value = body.get(member)
        if value is not None and not isinstance(value, kind):
            raise e.MalformedResponseError(
                f"{ENDPOINTS[spec.endpoint].path} answered 200 with a body that does not match its schema ({member}: not "
                f"{'an object' if kind is dict else 'a list'})", endpoint=spec.endpoint, status=200)
    if sent is not None:
        return sent
    try:
        return orjson.dumps(body)
    except TypeError:  # an integer beyond 64 bits, a key that is not a string
        return json.dumps(body, default=str).encode()


def _failure(vin: str, dataset: str, exc: e.VehicleDataError, attempts: int) -> dict[str, Any]:
    return {
        "vin": vin,
        "dataset": dataset,
        "status": getattr(exc, "status", None),
        "message": exc.message,
        "retryable": exc.retryable,
        "attempts": max(attempts, 1),
        "fetched_at": _now(),
        "endpoint": ENDPOINTS[exc.endpoint].path if exc.endpoint in ENDPOINTS else None,  # as api_calls has it
    }


def _now() -> datetime:
    return datetime.now(timezone.utc)
