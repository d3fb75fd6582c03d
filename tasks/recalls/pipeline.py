"""Recall checks and their campaign details, pipelined: a batch's details start as soon as its results land.

The batches are submitted, polled and fetched through their scheduler (tasks/recalls/batches.py);
each batch whose results land hands its id to the details (tasks/recalls/details.py), which look up
its VINs with recalls while the other batches are still being processed or waiting out a retry.
Both share the run's budget and stops. Details by VIN only: a model listing waits for the specs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.recalls.batches import BatchOptions, RecallOutcome, run_recall_batches
from fleet_data.tasks.recalls.details import DetailsOutcome, fetch_recall_details
from fleet_data.tasks.store.database import Database


@dataclass(frozen=True)
class DetailsProgress:
    """How campaign detail lookups report: `done(n)` as lookups settle, `due(total)` each time more are due (the
    total grows as batches land)."""

    done: Callable[[int], None] | None = None
    due: Callable[[int], None] | None = None


async def check_recalls_and_details(
    db: Database,
    run_id: str,
    due_vins: list[str],
    *,
    calls: Calls,
    batches: BatchOptions,
    chunk_size: int = 1000,
    journals: Path | None = None,
    details_progress: DetailsProgress | None = None,
) -> tuple[RecallOutcome, DetailsOutcome]:
    """The batches' outcome and the details' outcome; `calls` is shared by both (one budget, one set of stops),
    but for its progress: `calls.on_progress` hears of batch VINs, `details_progress` of the detail lookups."""
    landed: asyncio.Queue[str | None] = asyncio.Queue()
    progress = details_progress or DetailsProgress()
    details = asyncio.create_task(fetch_recall_details(
        db, run_id, calls=replace(calls, on_progress=progress.done), chunk_size=chunk_size, journals=journals,
        landed=landed, on_due=progress.due,
    ))
    try:
        outcome = await run_recall_batches(db, run_id, due_vins, calls=calls, batches=batches, on_landed=landed.put_nowait)
    except BaseException:
        details.cancel()
        raise
    landed.put_nowait(None)  # no more batches: the details end once the last one's are landed
    return outcome, await details
