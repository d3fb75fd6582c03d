"""The fleet refresh flow: ingest, plan, recall batches, per-VIN enrichment, finish.

It only orchestrates: every read and write happens in a task. Recall campaign
details start as each recall batch lands, beside the other datasets; matched by
model (`--recall-details model`), they come last: they group VINs by the specs' models.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Iterator
from typing import Any

from prefect import flow

from fleet_data.flows.fetchers import Fetchers
from fleet_data.flows.inflight import InFlight
from fleet_data.flows.naming import as_flow_run, records_failure, run_name
from fleet_data.flows.processes import die_with_parent_process

from fleet_data.tasks.datasets import LiveNames, names
from fleet_data.tasks.plan.due import Plan, chunk_vin_ranges, declaration
from fleet_data.tasks.settings import RefreshOptions
from fleet_data.tasks.control.prefect_api import watched
from fleet_data.tasks.control.resources import SERVICE_LOST, ResourceLost, halt, halted
from fleet_data.tasks.control.stops import CANCELLED, for_run
from fleet_data.tasks.run.context import current, holds_run_lock, new_run_id
from fleet_data.tasks.control.signals import cancellable, cancelled
from fleet_data.tasks.run.summary import RunBudget, RunSummary, Schedule
from fleet_data.tasks.steps.refresh_tasks import (
    RecallsChecked,
    StagedChunk,
    check_recalls,
    finish_refresh,
    ingest_fleet,
    notify_changes,
    plan_dry_run,
    plan_refresh,
    recall_details,
    resolve_plates,
)

# Specs first, the batch-checked recalls next, history before the valuations (its odometers are the mileage they
# ask with: the view vehicle_mileage), then every other dataset in the registry's order.
ORDER = LiveNames(lambda: ["specs", "recalls", "history", *(n for n in names() if n not in ("specs", "recalls", "history"))])


def waits_for_history(dataset: str, lanes: dict[str, deque], fetching: set[str]) -> bool:
    """A dataset asking a mileage (valuations) starts once the run's history has landed: its chunks then read the
    mileage again (tasks/plan/due.py `due_rows`), so a vehicle's first valuation asks with its best one."""
    return declaration(dataset).asks_mileage and (bool(lanes.get("history")) or "history" in fetching)


class HistoryGate:
    """Side by side, a valuation chunk starts once the history chunks that may hold its VINs have landed, not the
    whole history: its rows then read the mileage of every vehicle they ask about from the history landed (as
    `waits_for_history`, chunk by chunk), and the valuations fetch while the rest of the history lands."""

    def __init__(self, plan: Plan, lanes: dict[str, deque]):
        self.out: dict[int, tuple[str, str]] = {}  # history chunks not landed yet, by offset: their VIN range
        self.ranges: dict[str, dict[int, tuple[str, str]]] = {}  # valuation chunks' VIN ranges, by offset
        for dataset, chunks in lanes.items():
            path = plan.datasets[dataset].path
            if path is None or not (dataset == "history" or declaration(dataset).asks_mileage):
                continue
            ranges = dict(zip((offset for offset, _ in chunks), chunk_vin_ranges(path, list(chunks))))
            if dataset == "history":
                self.out = ranges
            else:
                self.ranges[dataset] = ranges

    def waits(self, dataset: str, offset: int) -> bool:
        """Whether `dataset`'s chunk at `offset` must wait: a history chunk not landed may hold one of its VINs."""
        if not self.out or dataset not in self.ranges:
            return False
        low, high = self.ranges[dataset][offset]
        return any(low <= last and first <= high for first, last in self.out.values())

    def landed(self, dataset: str, offset: int) -> None:
        if dataset == "history":
            self.out.pop(offset, None)


def fetch_side_by_side(lanes: dict[str, deque], summary: RunSummary, fetchers: Fetchers, plan: Plan,
                       concurrency: int) -> None:
    """Every dataset's chunks at once, two per dataset in flight, each dataset independent of the others.

    Two, so one chunk fetches while the flow lands the one before it (they take turns to call: see
    tasks/fetch/lanes.py, so `concurrency` still bounds the calls in flight per dataset); independent, so a
    dataset never waits for a slower one's chunk before starting its next. With `--workers N`, N + 1
    (flows/fetchers.py). Staged files land here, in the flow's process, as they arrive; once the run is
    stopped they stay journalled for the next run instead, and a chunk not back by the stop's deadline is
    left (flows/inflight.py, docs/stopping.md).
    """
    running: InFlight[tuple[str, int, int]] = InFlight(fetchers.run_id)  # (dataset, offset, length)
    gate = HistoryGate(plan, lanes)

    def fill(dataset: str) -> None:
        counts, chunks = summary.datasets[dataset], lanes[dataset]
        while chunks and sum(d == dataset for d, _, _ in running.tags()) < fetchers.chunks_in_flight:
            if counts.stop_reason or _stopped(fetchers.run_id):  # stopped: every chunk left, waiting or not
                counts.leave_pending(chunks.popleft()[1], _stopped(fetchers.run_id) or CANCELLED)
                continue
            if gate.waits(dataset, chunks[0][0]):
                return
            offset, length = chunks.popleft()
            future = fetchers.submit(dataset, plan.datasets[dataset].path, offset, length, concurrency, None)
            running.add(future, (dataset, offset, length))

    for dataset in lanes:
        fill(dataset)
    while running:
        finished = running.next()
        if finished is None:  # stopped, and the deadline passed: what is still out is left to the next run
            for dataset, _, length in running.leave():
                summary.leave_pending(dataset, length, CANCELLED)
            for dataset, chunks in lanes.items():  # and what never started is pending too, in the run's figures
                while chunks:
                    summary.leave_pending(dataset, chunks.popleft()[1], _stopped(fetchers.run_id) or CANCELLED)
            return
        landing = []  # this chunk and every other back by now: they land in one transaction
        offsets = []
        for future, (dataset, offset, length) in [finished, *running.ready()]:
            staged = _staged(fetchers, future)
            if staged is None:  # a service lost under it: its journal stays where the next run finds it
                summary.leave_pending(dataset, length, _stopped(fetchers.run_id) or CANCELLED)
                continue
            summary.add_chunk(dataset, staged.outcome)
            fill(dataset)  # the next chunk fetches while this one lands
            landing.append((dataset, staged))
            offsets.append((dataset, offset))
        if landing and not cancelled(fetchers.run_id):  # stopped: the answers stay journalled
            with service_lost(fetchers.run_id):  # not landed: the staged files stay for the next run
                fetchers.land(landing)
                for dataset, offset in offsets:
                    gate.landed(dataset, offset)
        for waiting in lanes:  # history chunks landed: the valuations over their VINs start (halted: left pending)
            fill(waiting)


@contextlib.contextmanager
def service_lost(run_id: str) -> Iterator[None]:
    """A service the run depends on lost under a chunk (tasks/control/services.py): the run is halted, not ended
    here; the chunks still out come back or are left, and the run ends failed with the reason (exit code 9)."""
    try:
        yield
    except ResourceLost as exc:
        if exc.kind != SERVICE_LOST:
            raise
        halt(run_id, exc.reason, exc.kind)


def _staged(fetchers: Fetchers, future: Any) -> StagedChunk | None:
    """What a fetch task staged; None when a service it depends on was lost (the run is halted then)."""
    with service_lost(fetchers.run_id):
        return fetchers.result(future)
    return None


def _stopped(run_id: str) -> str | None:
    """Why no further chunk of any dataset starts: a stop signal, or the run halted for its resources
    (a full disk, its store or lock gone: tasks/control/resources.py)."""
    halt = halted(run_id)
    return halt[1] if halt else CANCELLED if cancelled(run_id) else None


@flow(name="fleet-refresh", flow_run_name=run_name, persist_result=False, log_prints=False)
@as_flow_run  # named after our run_id, tagged with its files and datasets; the key from a Secret block if need be
def refresh_fleet(paths: list[str], options: RefreshOptions | None = None, run_id: str | None = None) -> dict[str, Any]:
    """Turn fleet files into fresh tables, calling only for what is stale and never paying twice.

    `options`: every option of the run (tasks/settings.py), its defaults when None; Prefect validates
    it and shows it in the UI. A dry run plans against the published database read-only and writes
    nothing (tasks/outputs/preview.py). SIGTERM or SIGINT while it runs cancels it (tasks/control/signals.py): it ends
    `cancelled`, nothing lost.
    """
    die_with_parent_process()  # under `fleet serve`, this runs in a child that must not outlive it
    run_id = run_id or new_run_id()
    options = options or RefreshOptions()
    if options.dry_run:
        return plan_dry_run(paths, options, run_id)
    return _refresh(paths, options, run_id)


@holds_run_lock("refresh")  # one run at a time, also when served or run by a worker
@records_failure  # a run that raises is recorded `failed`, not left `running`
@cancellable  # inside the flow run, where Prefect has put its own SIGTERM handler: ours comes after
@watched  # the Prefect server it reports to: lost, the run is halted (tasks/control/prefect_api.py)
def _refresh(paths: list[str], options: RefreshOptions, run_id: str) -> dict[str, Any]:
    # This process's calls; fetch tasks elsewhere get it from the flow (flows/fetchers.py, FetchAccess).
    for_run(run_id).window.seconds = options.retry_window
    staging_area = current(run_id).use_staging(options.staging, options.lake)  # the run's store and staging area (tasks/run/context.py)
    # Where fetch tasks run (flows/fetchers.py); a Dask cluster that cannot fetch is refused here, before any call.
    with Fetchers(staging_area, workers=options.workers, dask=options.dask, retry_window=options.retry_window) as fetchers:
        return _refresh_with(paths, options, run_id, fetchers)


def _refresh_with(paths: list[str], options: RefreshOptions, run_id: str, fetchers: Fetchers) -> dict[str, Any]:
    parameters = options.run_parameters()  # read by the landing's change detection (sql/changes/); never the notify URL
    ingest = ingest_fleet(paths, run_id, options.vin_column, parameters, options.plates)
    plan = plan_refresh(run_id, options.datasets, options.force, options.fresh or None)
    summary = RunSummary.start(run_id, ingest, plan)

    if refused := plan.refusal(options.max_units):
        if plan.plates:  # nothing is called: rows waiting for a plate lookup are rejected as not looked up
            summary.add_plates(resolve_plates(run_id, plan.plates.path, False, None, options.concurrency))
        summary.refuse(refused)
        return finish_refresh(run_id, summary, options.lake)

    schedule, budget = Schedule.of(options.max_units), RunBudget(options.max_units)
    if plan.plates:  # the VINs behind plates join the roster first, then every dataset is planned with them
        found = resolve_plates(run_id, plan.plates.path, True, budget.left, options.concurrency)
        summary.add_plates(found, budget)
        if found.valid:
            plan = plan_refresh(run_id, options.datasets, options.force, options.fresh or None, summary.printed_plan())
            summary.replan(plan)
    batch = _start_recalls(plan, options, run_id, summary, schedule, budget)
    _fetch(plan, options, summary, fetchers, schedule, budget)
    if fetchers.pids - {os.getpid()}:
        summary.fetched_in = sorted(fetchers.pids)
    if batch is not None:
        _finish_recalls(batch, options, run_id, summary, schedule, budget)

    summary.end(cancelled=cancelled(run_id))
    finished = finish_refresh(run_id, summary, options.lake)
    if options.notify:  # the run's changes to a webhook; nothing is posted when nothing changed
        finished["notification"] = notify_changes(run_id, options.notify)
    return finished


def _start_recalls(plan: Plan, options: RefreshOptions, run_id: str, summary: RunSummary, schedule: Schedule,
                   budget: RunBudget) -> Any:
    """Submit the recall batches; per-VIN campaign lookups need only the batches: each batch's start as it
    lands, beside the other datasets. One task at a time, the batches finish before anything else is fetched."""
    recalls = plan.datasets.get("recalls")
    if recalls is None:
        return None
    side_by_side = schedule is Schedule.SIDE_BY_SIDE
    pipelined = options.concurrency if side_by_side and options.recall_details == "vin" else None
    batch = check_recalls.submit(run_id, recalls.path, options.batch_size, options.webhook_url, budget.left,
                                 options.webhook_listen, pipelined)
    if not side_by_side:
        summary.add_recall_batches(batch.result().batches, budget)
    return batch


def _fetch(plan: Plan, options: RefreshOptions, summary: RunSummary, fetchers: Fetchers, schedule: Schedule,
           budget: RunBudget) -> None:
    """Every per-VIN dataset's chunks: side by side, or one task at a time, each seeing the budget left."""
    lanes = {d: deque(plan.datasets[d].chunks(options.chunk_size)) for d in ORDER if d in plan.datasets and d != "recalls"}
    fetchers.mileage_moves = bool(lanes.get("history"))  # the odometers valuations may ask with land in this run
    if schedule is Schedule.SIDE_BY_SIDE:
        fetch_side_by_side(lanes, summary, fetchers, plan, options.concurrency)
        return
    while any(lanes.values()):  # one chunk of each dataset in turn
        for dataset, chunks in lanes.items():
            if not chunks or waits_for_history(dataset, lanes, set()):
                continue
            offset, length = chunks.popleft()
            if summary.datasets[dataset].stop_reason or _stopped(fetchers.run_id):
                summary.leave_pending(dataset, length, _stopped(fetchers.run_id) or CANCELLED)
                continue
            waiting: InFlight[str] = InFlight(fetchers.run_id)
            waiting.add(fetchers.submit(dataset, plan.datasets[dataset].path, offset, length, options.concurrency,
                                        budget.left), dataset)
            finished = waiting.next()
            if finished is None:  # stopped, and the chunk not back by the stop's deadline
                summary.leave_pending(dataset, length, CANCELLED)
                continue
            staged: StagedChunk = finished[0].result()
            summary.add_chunk(dataset, staged.outcome, budget)
            if not cancelled(fetchers.run_id):  # stopped: the answers stay journalled; the next run lands them
                fetchers.land([(dataset, staged)])


def _finish_recalls(batch: Any, options: RefreshOptions, run_id: str, summary: RunSummary, schedule: Schedule,
                    budget: RunBudget) -> None:
    waiting: InFlight[str] = InFlight(run_id)
    waiting.add(batch, "recalls")
    if waiting.next() is None:  # stopped, and the batch task not back by the stop's deadline
        summary.leave_pending("recalls", summary.datasets["recalls"].planned, CANCELLED)
        return  # the batch stays in the ledger: the next run polls it again, never resubmits it
    checked: RecallsChecked = batch.result()
    if schedule is Schedule.SIDE_BY_SIDE:
        summary.add_recall_batches(checked.batches, budget)
    if cancelled(run_id) and checked.details is None:
        return  # stopped: campaign details are due again next run, from the recalls landed
    # Campaign details by model group VINs by the specs landed above, so they come last.
    summary.add_recall_details(checked.details or recall_details(run_id, budget.left, options.concurrency,
                                                                 options.recall_details))
