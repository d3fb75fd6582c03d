"""Recall checks and their campaign details, pipelined: a batch's details start as soon as its results land.

The batches are submitted, polled and fetched through their scheduler (tasks/recalls/batches.py);
each batch whose results land hands its id to the details (tasks/recalls/details.py), which look up
its VINs with recalls while the other batches are still being processed or waiting out a retry.
Both share the run's budget and stops. Details by VIN only: a model listing waits for the specs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

from connectors import Settings

from tasks.control.budget import Budget
from tasks.recalls.batches import RecallOutcome, run_recall_batches
from tasks.recalls.details import DetailsOutcome, fetch_recall_details
from tasks.control.stops import Stops
from tasks.store.database import Database


async def check_recalls_and_details(
    db: Database,
    run_id: str,
    due_vins: list[str],
    *,
    settings: Settings,
    batches_dir: Path,
    concurrency: int = 32,
    chunk_size: int = 1000,
    journals: Path | None = None,
    budget: Budget | None = None,
    stops: Stops | None = None,
    on_progress: Callable[[int], None] | None = None,
    on_details: Callable[[int], None] | None = None,
    **batch_options: Any,
) -> tuple[RecallOutcome, DetailsOutcome]:
    """The batches' outcome and the details' outcome. `batch_options`: `run_recall_batches`'s own options."""
    budget = budget or Budget(None)
    stops = stops or Stops()
    landed: asyncio.Queue[str | None] = asyncio.Queue()
    details = asyncio.create_task(fetch_recall_details(
        db, run_id, settings=settings, budget=budget, concurrency=concurrency, chunk_size=chunk_size, stops=stops,
        on_progress=on_details, journals=journals, landed=landed,
    ))
    try:
        batches = await run_recall_batches(db, run_id, due_vins, settings=settings, batches_dir=batches_dir,
                                           budget=budget, stops=stops, on_progress=on_progress,
                                           on_landed=landed.put_nowait, **batch_options)
    except BaseException:
        details.cancel()
        raise
    landed.put_nowait(None)  # no more batches: the details end once the last one's are landed
    return batches, await details
