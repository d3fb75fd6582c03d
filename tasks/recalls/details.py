"""Campaign details for VINs whose recall check found recalls.

A batch answer only counts a VIN's recalls. By default (`match="vin"`) each such VIN
gets `/v1/recalls?vin=`: the campaigns the service lists for that VIN (`matched_by =
'vin'`, confirmed). `match="model"` is an opt-in saving: one `/v1/recalls-ymm` call
(1 unit) lists every campaign of a model, and a VIN whose count equals the model's
campaign count is given all of them (`matched_by = 'model'`): the count is the VIN's
own, which campaigns it is are only likely. Every other VIN still gets `/v1/recalls`.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import polars as pl
import pyarrow as pa

from fleet_data.connectors import ENDPOINTS, AsyncVehicleDataClient, CallRecord
from fleet_data.connectors import errors as e
from fleet_data.connectors import models as m

from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.fetch.enrich import MAX_UNITS, fetch_chunk
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.staging.journal import AnswerJournal
from fleet_data.tasks.land.landing import land_enrichment
from fleet_data.tasks.land.shred import shred_model_listing
from fleet_data.tasks.fetch.lanes import Lane
from fleet_data.tasks.fetch.scheduler import Job, Scheduler
from fleet_data.tasks.control.stops import STOPPING_ERRORS, Pass
from fleet_data.tasks.store.database import Database


MATCHES = ("vin", "model")  # `fleet refresh --recall-details`


@dataclass
class DetailsOutcome:
    due: int = 0
    by_model: int = 0  # VINs whose campaigns came from a year/make/model listing
    by_vin: int = 0
    failed: int = 0
    pending: int = 0
    calls: int = 0
    units: int = 0
    possible_units: int = 0  # what calls never answered may have cost besides (tasks/staging/chunk.py)
    stop_reason: str | None = None


async def fetch_recall_details(
    db: Database,
    run_id: str,
    *,
    calls: Calls,
    chunk_size: int = 1000,
    match: str = "vin",
    journals: Path | None = None,
    landed: asyncio.Queue[str | None] | None = None,
    on_due: Callable[[int], None] | None = None,
) -> DetailsOutcome:
    """`journals`: the folder where per-VIN lookups are journalled before they land (see tasks/staging/journal.py).

    `landed`: the ids of recall batches as their results land, then None (tasks/recalls/pipeline.py):
    the details due now are looked up first, then each batch's as it lands, while the other batches
    are still processed (by VIN only: a model listing needs the specs landed first). `on_due` hears the
    number of lookups due so far, first and each time a batch adds some (a progress bar's total).
    """
    if match not in MATCHES:
        raise ValueError(f"recall details are matched by {' or '.join(MATCHES)}, not {match!r}")
    if landed is not None and match != "vin":
        raise ValueError("recall details are looked up as batches land only by VIN")
    due = db.query("recall_details_due", run_id=run_id, batch_id=None).to_dicts()
    outcome = DetailsOutcome(due=len(due))
    if on_due:
        on_due(outcome.due)
    listed, per_vin = _grouped(due, match)
    if listed:
        per_vin.extend(await _by_model(db, run_id, listed, calls, outcome))
    by_vin = _ByVin(db, run_id, calls, outcome, chunk_size, journals)
    taken = {row["vin"] for row in per_vin}
    await by_vin.look_up(per_vin)
    while landed is not None and (batch_id := await landed.get()) is not None:
        fresh = [r for r in db.query("recall_details_due", run_id=run_id, batch_id=batch_id).to_dicts()
                 if r["vin"] not in taken]
        taken.update(r["vin"] for r in fresh)
        outcome.due += len(fresh)
        if on_due and fresh:
            on_due(outcome.due)
        await by_vin.look_up(fresh)
    return outcome


def _grouped(due: list[dict[str, Any]], match: str) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
    """The model groups worth one listing each, and the VINs to look up one by one."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    per_vin: list[dict[str, Any]] = []
    for row in due:
        if match == "model" and row["year"] and row["make"] and row["model"]:
            groups[(row["year"], row["make"].lower(), row["model"].lower())].append(row)
        else:
            per_vin.append(row)
    listed = [rows for rows in groups.values() if _worth_a_listing(rows)]
    per_vin.extend(r for rows in groups.values() if not _worth_a_listing(rows) for r in rows)
    return listed, per_vin


@dataclass
class _ByVin:
    """Per-VIN lookups, one chunk of `chunk_size` at a time, each landed as it is done."""

    db: Database
    run_id: str
    calls: Calls
    outcome: DetailsOutcome
    chunk_size: int
    journals: Path | None
    lane: Lane = field(default_factory=Lane)  # a chunk with only waiting retries left hands them to the next one

    async def look_up(self, rows: list[dict[str, Any]]) -> None:
        outcome, lane = self.outcome, self.lane
        chunks = [rows[start : start + self.chunk_size] for start in range(0, len(rows), self.chunk_size)]
        for n, chunk in enumerate(chunks):
            if outcome.stop_reason:
                outcome.pending += len(chunk) + len(lane.adopt())
                continue
            journal = (AnswerJournal.create(self.journals, self.run_id, "recall_details",
                                            secrets=(self.calls.settings.api_key or "",)) if self.journals else None)
            with journal or contextlib.nullcontext(), lane.followed(n + 1 < len(chunks)):
                result: ChunkResult = await fetch_chunk(  # follows: after the batch's results
                    "recall_details", chunk, calls=self.calls, journal=journal, lane=lane, follows=True)
            land_enrichment(self.db, self.run_id, result)
            if journal is not None:
                journal.delete()  # landed
            outcome.by_vin += len(result.found) + len(result.no_data)
            outcome.failed += len(result.failed)
            outcome.pending += len(result.pending)
            outcome.calls += len(result.calls)
            outcome.units += result.units
            outcome.possible_units += result.possible_units
            outcome.stop_reason = outcome.stop_reason or result.stop_reason


def _listing_frames(rows: list[dict[str, Any]], settled: list[dict[str, Any]], listing: bytes | None,
                    spent: list[tuple[str, CallRecord, datetime, str | None]]) -> dict[str, pl.DataFrame | pa.Table]:
    """What one model listing lands: its calls and, for the VINs it settled, their campaigns and checks and the raw
    answer, shredded from the listing's bytes in SQL (tasks/land/shred.py)."""
    frames: dict[str, pl.DataFrame | pa.Table] = {"api_calls": staging.api_calls_frame(spent)}
    if settled and listing is not None:
        first = rows[0]
        asked = {"year": first["year"], "make": first["make"], "model": first["model"]}
        frames |= shred_model_listing(listing, [r["vin"] for r in settled], asked, _now())
    return frames


def _worth_a_listing(rows: list[dict[str, Any]]) -> bool:
    """A model listing settles only VINs whose count equals the model's campaign count, which is at least
    the group's highest count: unless two VINs share that count, per-VIN lookups cost no more."""
    top = max(r["recall_count"] for r in rows)
    return sum(r["recall_count"] == top for r in rows) >= 2


async def _by_model(db, run_id, groups, calling: Calls, outcome) -> list[dict[str, Any]]:  # noqa: ANN001
    """List each model's campaigns once, `concurrency` listings at a time through the scheduler, each landed
    as it is settled; return the VINs no listing could settle (they need a per-VIN lookup)."""
    settings, budget, stops, on_progress = calling.settings, calling.budget, calling.stops, calling.on_progress
    api = ENDPOINTS["recalls-ymm"].api
    leftovers: list[dict[str, Any]] = []
    calls: dict[int, list[tuple[str, CallRecord, datetime, str | None]]] = {}
    reserved: set[int] = set()
    scheduler: Scheduler[list[dict[str, Any]]] = Scheduler(stops, api, "recalls-ymm", slots=calling.concurrency)

    def settle(job: Job[list[dict[str, Any]]], campaigns: int | None, listing: bytes | None) -> None:
        rows, spent = job.item, calls.pop(id(job), [])
        units = sum(r.units for _, r, _, _ in spent)
        if id(job) in reserved:
            budget.settle(1, units)
        settled = [r for r in rows if campaigns is not None and r["recall_count"] == campaigns]
        if spent or settled:
            db.land_chunk(_listing_frames(rows, settled, listing, spent), run_id)
        outcome.calls += len(spent)
        outcome.units += units
        outcome.by_model += len(settled)
        settled_vins = {r["vin"] for r in settled}
        leftovers.extend(r for r in rows if r["vin"] not in settled_vins)
        if on_progress:
            on_progress(len(settled))

    def stopped(job: Job[list[dict[str, Any]]], reason: str) -> None:
        outcome.stop_reason = outcome.stop_reason or reason
        settle(job, None, None)

    async def attempt(job: Job[list[dict[str, Any]]], leave: Pass) -> None:
        if id(job) not in reserved:
            if not budget.reserve(1):
                scheduler.halt(MAX_UNITS)
                stopped(job, MAX_UNITS)
                return
            reserved.add(id(job))
        spent = calls.setdefault(id(job), [])

        def observe(record: CallRecord) -> None:
            spent.append((uuid.uuid4().hex, record, _now(), None))
            stops.observe(record.endpoint, record.status)
            leave.answered(record.status)

        campaigns = listing = None
        async with AsyncVehicleDataClient(settings, on_call=observe) as client:  # scheduled: never waits in place
            try:
                campaigns, listing = await _listing(client, job.item[0])
            except STOPPING_ERRORS as exc:
                outcome.stop_reason = outcome.stop_reason or stops.refuse(api, exc)
            except e.VehicleDataError:
                pass  # not enabled, not found, or failing: the per-VIN route still works
        settle(job, campaigns, listing)

    scheduler.add((Job(rows) for rows in groups), follows=True)  # after the batch's results
    await scheduler.run(attempt, stopped)
    return leftovers


async def _listing(client: AsyncVehicleDataClient, first: dict[str, Any]) -> tuple[int, bytes | None]:
    """A model's campaign count and its listing as the bytes sent, to shred in SQL (the model checks the shape)."""
    answer = await client.request("recalls-ymm", {"year": first["year"], "make": first["make"], "model": first["model"]},
                                  raw=True)
    return len(m.RecallsByModel.from_payload(answer.body, "recalls-ymm").data.recalls), answer.raw


def _now() -> datetime:
    return datetime.now(timezone.utc)
