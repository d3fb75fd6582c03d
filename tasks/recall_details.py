"""Campaign details for VINs whose recall check found recalls.

A batch answer only counts a VIN's recalls. By default (`match="vin"`) each such VIN
gets `/v1/recalls?vin=`: the campaigns the service lists for that VIN (`matched_by =
'vin'`, confirmed). `match="model"` is an opt-in saving: one `/v1/recalls-ymm` call
(1 unit) lists every campaign of a model, and a VIN whose count equals the model's
campaign count is given all of them (`matched_by = 'model'`): the count is the VIN's
own, which campaigns it is are only likely. Every other VIN still gets `/v1/recalls`.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import polars as pl

from connectors import ENDPOINTS, AsyncVehicleDataClient, CallRecord, Settings
from connectors import errors as e

from . import staging
from .enrich import Budget, ChunkResult, fetch_chunk
from .journal import AnswerJournal
from .stops import STOPPING_ERRORS, Stopped, Stops
from .landing import land_enrichment
from .storage import Database


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
    stop_reason: str | None = None


async def fetch_recall_details(
    db: Database,
    run_id: str,
    *,
    settings: Settings,
    budget: Budget | None = None,
    concurrency: int = 32,
    chunk_size: int = 1000,
    stops: Stops | None = None,
    on_progress: Callable[[int], None] | None = None,
    match: str = "vin",
    journals: Path | None = None,
) -> DetailsOutcome:
    """`journals`: the folder where per-VIN lookups are journalled before they land (see tasks/journal.py)."""
    if match not in MATCHES:
        raise ValueError(f"recall details are matched by {' or '.join(MATCHES)}, not {match!r}")
    budget = budget or Budget(None)
    stops = stops or Stops()
    due = db.query("recall_details_due", run_id=run_id).to_dicts()
    outcome = DetailsOutcome(due=len(due))
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    per_vin: list[dict[str, Any]] = []
    for row in due:
        if match == "model" and row["year"] and row["make"] and row["model"]:
            groups[(row["year"], row["make"].lower(), row["model"].lower())].append(row)
        else:
            per_vin.append(row)
    for rows in list(groups.values()):
        # A model listing settles only VINs whose count equals the model's campaign count, which is at
        # least the group's highest count: unless two VINs share that count, per-VIN lookups cost no more.
        top = max(r["recall_count"] for r in rows)
        if sum(r["recall_count"] == top for r in rows) < 2:
            per_vin.extend(rows)
            continue
        leftovers = await _by_model(db, run_id, rows, settings, budget, outcome, stops)
        per_vin.extend(leftovers)
        if on_progress:
            on_progress(len(rows) - len(leftovers))
    for start in range(0, len(per_vin), chunk_size):
        rows = per_vin[start : start + chunk_size]
        if outcome.stop_reason:
            outcome.pending += len(rows)
            continue
        journal = AnswerJournal.create(journals, run_id, "recall_details", secrets=(settings.api_key or "",)) if journals else None
        with journal or contextlib.nullcontext():
            result: ChunkResult = await fetch_chunk(
                "recall_details", rows, settings=settings, concurrency=concurrency, budget=budget, stops=stops,
                on_progress=on_progress, journal=journal,
            )
        land_enrichment(db, run_id, result)
        if journal is not None:
            journal.delete()  # landed
        outcome.by_vin += len(result.found) + len(result.no_data)
        outcome.failed += len(result.failed)
        outcome.pending += len(result.pending)
        outcome.calls += len(result.calls)
        outcome.units += result.units
        outcome.stop_reason = outcome.stop_reason or result.stop_reason
    return outcome


async def _by_model(db, run_id, rows, settings, budget, outcome, stops) -> list[dict[str, Any]]:  # noqa: ANN001
    """List the model's campaigns once; return the VINs it cannot settle (they need a per-VIN lookup)."""
    api = ENDPOINTS["recalls-ymm"].api
    if outcome.stop_reason or stops.reason(api) or not budget.reserve(1):
        outcome.stop_reason = outcome.stop_reason or stops.reason(api) or "max-units reached"
        return rows
    calls: list[tuple[str, CallRecord, datetime, str | None]] = []
    leave: list = [None]  # the call's leave to start, settled by its first answer (tasks/stops.py)

    def observe(record: CallRecord) -> None:
        calls.append((uuid.uuid4().hex, record, _now(), None))
        if leave[0] is not None:
            leave[0].answered(record.status)

    first = rows[0]
    async with AsyncVehicleDataClient(settings, on_call=observe, interrupt=lambda: stops.stopping(api)) as client:
        try:
            listing = await stops.call(api, lambda: client.recalls_by_model(first["year"], first["make"], first["model"]),
                                       lambda held: leave.__setitem__(0, held))
            pool = listing.data.recalls
        except STOPPING_ERRORS as exc:
            outcome.stop_reason = f"{exc.status} {exc.message}"
            pool = None
        except Stopped as exc:
            outcome.stop_reason = exc.reason
            pool = None
        except e.VehicleDataError:
            pool = None  # not enabled, not found, or failing: the per-VIN route still works
    spent = sum(r.units for _, r, _, _ in calls)
    budget.settle(1, spent)
    at = _now()
    settled = [r for r in rows if pool is not None and r["recall_count"] == len(pool)]
    frames: dict[str, pl.DataFrame] = {"api_calls": staging.api_calls_frame(calls)}
    if settled:
        frames["recalls"] = staging.recalls_frame([(r["vin"], pool, at) for r in settled], matched_by="model")
        frames["recall_checks"] = pl.DataFrame(
            [{"vin": r["vin"], "checked_via": "model", "batch_id": None, "has_recalls": True,
              "recall_count": r["recall_count"], "campaigns_listed": True, "fetched_at": at} for r in settled],
            schema=staging.RECALL_CHECK_SCHEMA, orient="row",
        )
        frames["raw_responses"] = staging.raw_responses_frame([{
            "dataset": "recalls", "vin": None, "batch_id": None, "endpoint": "recalls-ymm",
            "request_params": {"year": first["year"], "make": first["make"], "model": first["model"]},
            "status": 200, "body": listing.raw, "fetched_at": at}])
    db.land_chunk(frames, run_id)
    outcome.calls += len(calls)
    outcome.units += spent
    outcome.by_model += len(settled)
    settled_vins = {r["vin"] for r in settled}
    return [r for r in rows if r["vin"] not in settled_vins]


def _now() -> datetime:
    return datetime.now(timezone.utc)
