"""Look up the VINs behind plates (`GET /v2/platedecoder`): one call per distinct (country, state, plate).

Which rows need a lookup and where each lands afterwards: tasks/ingest/plates.py.
"""

from __future__ import annotations

import uuid
from contextvars import ContextVar

from fleet_data.connectors import ENDPOINTS, AsyncVehicleDataClient, CallRecord, estimate_units
from fleet_data.connectors import errors as e
from fleet_data.connectors import models as m

from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.control.stops import STOPPING_ERRORS, Pass
from fleet_data.tasks.fetch.scheduler import Job, Scheduler
from fleet_data.tasks.ingest.plates import ENDPOINT, Key, Lookup, PlateLookups, _now


def _answer(answer: m.PlateDecode | m.PlateFanOut) -> tuple[str | None, str | None]:
    """The VIN of a decoder answer, or why there is none."""
    if isinstance(answer, m.PlateFanOut):  # never asked for (a US plate is always sent with its state)
        vins = {str(r.get("vin")) for r in answer.results if r.get("vin")}
        return (vins.pop(), None) if len(vins) == 1 else (None, f"{len(vins)} vehicles match this plate")
    return (answer.vin, None) if answer.vin else (None, "the answer has no VIN")


async def look_up_plates(
    keys: list[Key], *, calls: Calls,
) -> PlateLookups:
    """One call per key, `concurrency` at a time through the scheduler (tasks/fetch/scheduler.py): a lookup waiting
    out a Retry-After goes back to the queue and its slot asks for other plates meanwhile. A quota, credit
    or permission refusal stops the rest, and so does a stop of the run's key (`stops`: a cancellation),
    which also ends a retry's wait."""
    result = PlateLookups()
    settings, concurrency, budget, stops = calls.settings, calls.concurrency, calls.budget, calls.stops
    api = ENDPOINTS[ENDPOINT].api
    scheduler: Scheduler[Key] = Scheduler(stops, api, ENDPOINT, slots=concurrency)
    reserved: dict[Key, int] = {}  # key -> units it holds in the budget, until it is settled
    spent: dict[Key, int] = {}
    current: ContextVar[tuple[Key, Pass] | None] = ContextVar("plate_lookup", default=None)

    def observe(record: CallRecord) -> None:
        result.calls.append((uuid.uuid4().hex, record, _now(), None))
        if (now := current.get()) is not None:
            key, leave = now
            spent[key] = spent.get(key, 0) + record.units
            leave.answered(record.status)

    def settle(key: Key) -> None:
        if key in reserved:
            budget.settle(reserved.pop(key), spent.get(key, 0))
        calls.progress(1)

    def stopped(job: Job[Key], reason: str) -> None:
        result.stop_reason = result.stop_reason or reason
        result.not_looked_up.append(job.item)
        settle(job.item)

    async def attempt(job: Job[Key], leave: Pass) -> None:
        key = job.item
        if key not in reserved:
            cost = estimate_units(ENDPOINT, {"country": key[0]})
            if not budget.reserve(cost):
                scheduler.halt("max-units reached")
                stopped(job, "max-units reached")
                return
            reserved[key] = cost
        token = current.set((key, leave))
        try:
            result.results[key] = await _look_up(client, key)
        except STOPPING_ERRORS as exc:
            reason = f"{exc.status} {exc.message}"
            scheduler.halt(reason)  # the plates still queued are not looked up
            stopped(job, reason)
            return
        finally:  # a `RetryLater` passes through to the scheduler: still reserved, asked again later
            current.reset(token)
        settle(key)

    scheduler.add(Job(key) for key in keys)
    async with AsyncVehicleDataClient(settings, on_call=observe, interrupt=lambda: stops.stopping(api)) as client:
        await scheduler.run(attempt, stopped)
    return result


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
