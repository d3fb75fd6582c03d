"""Look up the VINs behind plates (`GET /v2/platedecoder`): one call per distinct (country, state, plate).

Which rows need a lookup and where each lands afterwards: tasks/ingest/plates.py. With a journal
(tasks/staging/journal.py), every call is written down before it is sent and each lookup's outcome as it
arrives, so a kill during the lookups loses neither a call paid for nor an answer: the next run lands them.
"""

from __future__ import annotations

import uuid
from contextvars import ContextVar

from typing import TYPE_CHECKING

from fleet_data.connectors import ENDPOINTS, AsyncVehicleDataClient, CallRecord, estimate_units
from fleet_data.connectors import errors as e
from fleet_data.connectors import models as m
from fleet_data.connectors.calls import CallIntent

from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.control.stops import STOPPING_ERRORS, Pass
from fleet_data.tasks.fetch.scheduler import Job, Scheduler
from fleet_data.tasks.ingest.plates import ENDPOINT, Key, Lookup, PlateLookups, _now

if TYPE_CHECKING:
    from fleet_data.tasks.staging.journal import AnswerJournal


def _answer(answer: m.PlateDecode | m.PlateFanOut) -> tuple[str | None, str | None]:
    """The VIN of a decoder answer, or why there is none."""
    if isinstance(answer, m.PlateFanOut):  # never asked for (a US plate is always sent with its state)
        vins = {str(r.get("vin")) for r in answer.results if r.get("vin")}
        return (vins.pop(), None) if len(vins) == 1 else (None, f"{len(vins)} vehicles match this plate")
    return (answer.vin, None) if answer.vin else (None, "the answer has no VIN")


async def look_up_plates(
    keys: list[Key], *, calls: Calls, journal: AnswerJournal | None = None,
) -> PlateLookups:
    """One call per key, `concurrency` at a time through the scheduler (tasks/fetch/scheduler.py): a lookup waiting
    out a Retry-After goes back to the queue and its slot asks for other plates meanwhile. A quota, credit
    or permission refusal stops the rest, and so does a stop of the run's key (`stops`: a cancellation),
    which also ends a retry's wait. With a `journal`, each call is in it before it is sent, and each
    lookup's outcome (on the row of its last call, the key as its request) before the next call starts."""
    lookups = _Lookups(calls, journal)
    lookups.scheduler.add(Job(key) for key in keys)
    async with AsyncVehicleDataClient(calls.settings, on_call=lookups.observe,
                                      on_send=lookups.sending if journal is not None else None,
                                      interrupt=lambda: calls.stops.stopping(lookups.api)) as client:
        lookups.client = client
        await lookups.scheduler.run(lookups.attempt, lookups.stopped)
    return lookups.result


class _Lookups:
    """The plate lookups of one task: the scheduler's `attempt` and `stopped`, the client's hooks, the budget held."""

    def __init__(self, calls: Calls, journal: AnswerJournal | None) -> None:
        self.calls, self.journal, self.result = calls, journal, PlateLookups()
        self.api = ENDPOINTS[ENDPOINT].api
        self.scheduler: Scheduler[Key] = Scheduler(calls.stops, self.api, ENDPOINT, slots=calls.concurrency)
        self.client: AsyncVehicleDataClient | None = None
        self.reserved: dict[Key, int] = {}  # key -> units it holds in the budget, until it is settled
        self.spent: dict[Key, int] = {}
        self.settling: dict[Key, tuple] = {}  # key -> its last call, journalled with the outcome it settles
        self.current: ContextVar[tuple[Key, Pass] | None] = ContextVar("plate_lookup", default=None)

    def sending(self, intent: CallIntent) -> None:
        self.journal.sent(intent, _now())  # type: ignore[union-attr]  # given to the client only with a journal

    def observe(self, record: CallRecord) -> None:
        call = (record.call_id or uuid.uuid4().hex, record, _now(), None)
        self.result.calls.append(call)
        now = self.current.get()
        if now is not None:
            key, leave = now
            self.spent[key] = self.spent.get(key, 0) + record.units
            leave.answered(record.status)
        if self.journal is not None:
            if record.will_retry or now is None:
                self.journal.attempt(call)
            else:
                self.settling[now[0]] = call

    def journalled(self, key: Key, lookup: Lookup | None) -> None:
        """The lookup's outcome on its last call's row; a lookup that stopped (a refusal) leaves only the call."""
        call = self.settling.pop(key, None)
        if self.journal is None:
            return
        if lookup is None:
            if call is not None:
                self.journal.attempt(call)
            return
        self.journal.answer(call, lookup.vin, lookup.outcome, lookup.fetched_at, message=lookup.message,
                            request={"country": key[0], "state": key[1], "plate": key[2]})

    def settle(self, key: Key) -> None:
        if key in self.reserved:
            self.calls.budget.settle(self.reserved.pop(key), self.spent.get(key, 0))
        self.calls.progress(1)

    def stopped(self, job: Job[Key], reason: str) -> None:
        self.result.stop_reason = self.result.stop_reason or reason
        self.result.not_looked_up.append(job.item)
        self.settle(job.item)

    async def attempt(self, job: Job[Key], leave: Pass) -> None:
        key = job.item
        if key not in self.reserved:
            cost = estimate_units(ENDPOINT, {"country": key[0]})
            if not self.calls.budget.reserve(cost):
                self.scheduler.halt("max-units reached")
                self.stopped(job, "max-units reached")
                return
            self.reserved[key] = cost
        token = self.current.set((key, leave))
        lookup = None
        try:
            assert self.client is not None
            lookup = self.result.results[key] = await _look_up(self.client, key)
        except STOPPING_ERRORS as exc:
            reason = f"{exc.status} {exc.message}"
            self.scheduler.halt(reason)  # the plates still queued are not looked up
            self.stopped(job, reason)
            return
        finally:  # a `RetryLater` passes through to the scheduler: still reserved, asked again later
            self.current.reset(token)
            if key in self.settling or lookup is not None:
                self.journalled(key, lookup)
        self.settle(key)


async def _look_up(client: AsyncVehicleDataClient, key: Key) -> Lookup:
    """One plate's answer; a refusal that stops the run's lookups (quota, credits, key) is raised."""
    country, state, plate = key
    try:
        vin, why = _answer(await client.plate(plate, country=country or "", state=state))
        return Lookup("found" if vin else "not_found", vin, 200, why, _now())
    except e.NotFoundError as exc:
        return Lookup("not_found", None, exc.status, exc.message, _now())
    except STOPPING_ERRORS:
        raise
    except e.VehicleDataError as exc:
        return Lookup("failed", None, getattr(exc, "status", None), exc.message, _now())
