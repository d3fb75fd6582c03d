"""The fleet refresh flow: ingest, plan, recall batches, per-VIN enrichment, finish.

It only orchestrates: every read and write happens in a task. Recall campaign
details start as each recall batch lands, beside the other datasets; matched by
model (`--recall-details model`), they come last: they group VINs by the specs' models.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Any

from prefect import flow
from prefect.futures import as_completed

from flows.fetchers import Fetchers, chunk_counts
from flows.defaults import DEFAULT_DB, DEFAULT_LAKE, DEFAULT_VALUE_MOVE  # absolute: Prefect loads this file by path
from flows.naming import as_flow_run, records_failure, run_name
from flows.processes import die_with_parent_process


from tasks.datasets import LiveNames, names
from tasks.plan.due import DEFAULT_DATASETS, Plan
from tasks.control.retry_window import DEFAULT_SECONDS as DEFAULT_RETRY_WINDOW
from tasks.control.stops import CANCELLED, for_run
from tasks.run.context import current, holds_run_lock, new_run_id
from tasks.control.signals import cancellable, cancelled
from tasks.outputs.summary import (add_counts, budget_left, final_status, record_batch, record_chunk, record_plates, replan,
                           start_summary)
from tasks.steps.refresh_tasks import (
    check_recalls,
    finish_refresh,
    ingest_fleet,
    notify_changes,
    plan_dry_run,
    plan_refresh,
    recall_details,
    resolve_plates,
)

# Specs first, the batch-checked recalls next, then every other dataset in the registry's order.
ORDER = LiveNames(lambda: ["specs", "recalls", *(n for n in names() if n not in ("specs", "recalls"))])


def fetch_side_by_side(lanes: dict[str, deque], summary: dict[str, Any], fetchers: Fetchers, plan: Plan,
                       concurrency: int) -> None:
    """Every dataset's chunks at once, two per dataset in flight, each dataset independent of the others.

    Two, so one chunk fetches while the flow lands the one before it (they take turns to call: see
    tasks/fetch/lanes.py, so `concurrency` still bounds the calls in flight per dataset); independent, so a
    dataset never waits for a slower one's chunk before starting its next. With `--workers N`, N + 1
    (flows/fetchers.py). Staged files land here, in the flow's process, as they arrive.
    """
    running: dict[Any, str] = {}

    def fill(dataset: str) -> None:
        counts, chunks = summary["datasets"][dataset], lanes[dataset]
        while chunks and sum(d == dataset for d in running.values()) < fetchers.chunks_in_flight:
            offset, length = chunks.popleft()
            if counts["stop_reason"] or cancelled(fetchers.run_id):
                counts["pending"] += length  # the endpoint is stopped: not failed, due again next run
                counts["stop_reason"] = counts["stop_reason"] or CANCELLED
                continue
            running[fetchers.submit(dataset, plan.datasets[dataset].path, offset, length, concurrency, None)] = dataset

    for dataset in lanes:
        fill(dataset)
    while running:
        finished = next(as_completed(list(running)))
        dataset = running.pop(finished)
        staged = finished.result()
        record_chunk(summary["datasets"][dataset], chunk_counts(staged))
        fill(dataset)  # the next chunk fetches while this one lands
        fetchers.land(dataset, staged)


@flow(name="fleet-refresh", flow_run_name=run_name, persist_result=False, log_prints=False)
@as_flow_run  # named after our run_id, tagged with its files and datasets; the key from a Secret block if need be
def refresh_fleet(
    paths: list[str],
    db: str = DEFAULT_DB,
    lake: str | None = DEFAULT_LAKE,
    datasets: list[str] | None = None,
    max_units: int | None = None,
    force: bool = False,
    dry_run: bool = False,
    vin_column: str | None = None,
    freshness: dict[str, str] | None = None,
    chunk_size: int = 500,
    concurrency: int = 32,
    batch_size: int = 10_000,
    webhook_url: str | None = None,
    webhook_listen: str | None = None,
    run_id: str | None = None,
    recall_details_by: str = "vin",
    plates: bool = True,
    notify: str | None = None,
    value_move: float = DEFAULT_VALUE_MOVE,
    workers: int | None = None,
    dask: str | None = None,
    staging: str | None = None,
    retry_window: float | None = DEFAULT_RETRY_WINDOW,
) -> dict[str, Any]:
    """Turn fleet files into fresh tables, calling only for what is stale and never paying twice.

    A dry run plans against the published database read-only and writes nothing (tasks/outputs/preview.py).
    SIGTERM or SIGINT while it runs cancels it (tasks/control/signals.py): it ends `cancelled`, nothing lost.
    `retry_window`: seconds retries get once every first call is made (tasks/control/retry_window.py); None: no bound.
    """
    die_with_parent_process()  # under `fleet serve`, this runs in a child that must not outlive it
    run_id = run_id or new_run_id()
    datasets = list(datasets or DEFAULT_DATASETS)
    if dry_run:
        return plan_dry_run(paths, db, run_id, vin_column, datasets, force, freshness, plates, max_units)
    return _refresh(paths, db, lake, datasets, max_units, force, vin_column, freshness, chunk_size, concurrency,
                    batch_size, webhook_url, webhook_listen, run_id, recall_details_by, plates, notify, value_move,
                    workers, dask, staging, retry_window)


@holds_run_lock("refresh")  # one run at a time, also when served or run by a worker
@records_failure  # a run that raises is recorded `failed`, not left `running`
@cancellable  # inside the flow run, where Prefect has put its own SIGTERM handler: ours comes after
def _refresh(paths: list[str], db: str, lake: str | None, datasets: list[str], max_units: int | None, force: bool,
             vin_column: str | None, freshness: dict[str, str] | None, chunk_size: int, concurrency: int,
             batch_size: int, webhook_url: str | None, webhook_listen: str | None, run_id: str,
             recall_details_by: str, plates: bool, notify: str | None, value_move: float, workers: int | None,
             dask: str | None, staging: str | None, retry_window: float | None) -> dict[str, Any]:
    for_run(run_id).window.seconds = retry_window  # this process's calls; worker processes read FLEET_RETRY_WINDOW
    parameters = {"datasets": datasets, "max_units": max_units, "force": force, "dry_run": False,
                  "freshness": freshness, "chunk_size": chunk_size, "batch_size": batch_size,
                  "recall_details_by": recall_details_by, "plates": plates,
                  "value_move": value_move}  # read by the landing's change detection (sql/changes/); never the notify URL
    staging_area = current(run_id).use_staging(staging)  # the run's store and staging area (tasks/run/context.py)
    ingest = ingest_fleet(paths, run_id, vin_column, parameters, plates)
    plan = Plan.from_dict(plan_refresh(run_id, datasets, force, freshness))
    summary = start_summary(run_id, ingest, plan)

    if max_units is not None and plan.estimated_units > max_units:
        if plan.plates:  # nothing is called: rows waiting for a plate lookup are rejected as not looked up
            record_plates(summary, resolve_plates(run_id, plan.plates.path, False, None, concurrency), None)
        summary["status"] = "refused"
        summary["message"] = (f"the plan costs {plan.estimated_units} units, more than --max-units {max_units}: "
                              "nothing was called")
        return finish_refresh(run_id, summary, None)

    # Without a budget, the recall batch is processed by the service while per-VIN chunks run, and
    # the datasets' chunks run side by side (see fetch_side_by_side). With --max-units everything
    # runs one task at a time so the budget each task sees is exact.
    parallel = max_units is None
    budget = max_units
    if plan.plates:  # the VINs behind plates join the roster first, then every dataset is planned with them
        found = resolve_plates(run_id, plan.plates.path, True, budget, concurrency)
        budget = record_plates(summary, found, budget)
        if found["valid"]:
            plan = Plan.from_dict(plan_refresh(run_id, datasets, force, freshness))
            replan(summary, plan)
    recalls = plan.datasets.get("recalls")
    batch = None
    if recalls is not None:
        # Per-VIN campaign lookups need only the batches: each batch's start as it lands, beside the other datasets.
        pipelined = concurrency if parallel and recall_details_by == "vin" else None
        batch = check_recalls.submit(run_id, recalls.path, batch_size, webhook_url, budget, webhook_listen, pipelined)
        if not parallel:
            budget = record_batch(summary, batch.result(), budget)

    lanes = {d: deque(plan.datasets[d].chunks(chunk_size)) for d in ORDER if d in plan.datasets and d != "recalls"}
    with Fetchers(staging_area, workers=workers, dask=dask) as fetchers:  # see flows/fetchers.py
        if parallel:
            fetch_side_by_side(lanes, summary, fetchers, plan, concurrency)
        while not parallel and any(lanes.values()):  # one chunk of each dataset in turn, each task seeing the budget left
            for dataset, chunks in lanes.items():
                if not chunks:
                    continue
                offset, length = chunks.popleft()
                counts = summary["datasets"][dataset]
                if counts["stop_reason"] or cancelled(fetchers.run_id):
                    counts["pending"] += length  # the endpoint is stopped: not failed, due again next run
                    counts["stop_reason"] = counts["stop_reason"] or CANCELLED
                    continue
                staged = fetchers.submit(dataset, plan.datasets[dataset].path, offset, length, concurrency, budget).result()
                budget = budget_left(budget, record_chunk(counts, chunk_counts(staged)))
                fetchers.land(dataset, staged)
    if fetchers.pids - {os.getpid()}:
        summary["fetched_in"] = sorted(fetchers.pids)  # the worker processes that fetched (--workers, --dask)

    if batch is not None:
        checked = batch.result()
        if parallel:
            budget = record_batch(summary, checked, budget)
        # Campaign details by model group VINs by the specs landed above, so they come last.
        outcome = checked.get("details") or recall_details(run_id, budget, concurrency, recall_details_by)
        summary["recall_details"] = outcome
        add_counts(summary, calls=outcome["calls"], units=outcome["units"])

    final_status(summary, cancelled=cancelled(run_id))
    summary = finish_refresh(run_id, summary, lake)
    if notify:  # the run's changes to a webhook; nothing is posted when nothing changed
        summary["notification"] = notify_changes(run_id, notify)
    return summary
