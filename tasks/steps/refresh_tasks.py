"""The refresh's Prefect tasks. Each is chunk-sized and takes and returns small values.

The work itself lives in the stages' modules (ingest, plan, fetch, land, outputs); these
wrappers take the run id and find the run's context (tasks/run/context.py: its one store
connection, its staging area, its publishing) and report progress. Tasks of the flow's process read
the service settings from the environment; a fetch task, which may run in another process or on a
Dask worker, gets the flow's (`FetchAccess`), its secrets as `SecretStr`, redacted wherever Prefect,
Dask or a log shows them.
"""

from __future__ import annotations

import asyncio
import logging
import os
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypedDict

import polars as pl
import pyarrow as pa
from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE, CachePolicy
from prefect.exceptions import MissingContextError
from prefect.runtime import flow_run
from pydantic import BaseModel, ConfigDict

from fleet_data.connectors import ServiceAccess, Settings

from fleet_data.tasks.control import progress
from fleet_data.tasks.run.context import current
from fleet_data.tasks.settings import RefreshOptions, client_settings, deadline_settings
from fleet_data.tasks.steps import refresh_steps as steps
from fleet_data.tasks.outputs.changes import change_message
from fleet_data.connectors.notify import PostRetries, post_json
from fleet_data.connectors.transport import run_calls
from fleet_data.tasks.control import prefect_api, quiet, remote_stop, resources, stops
from fleet_data.tasks.control.signals import cancelled
from fleet_data.tasks.fetch.enrich import fetch_chunk
from fleet_data.tasks.control.budget import Budget
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.control.failpoints import failpoint
from fleet_data.tasks.ingest.fleet_files import read_fleet
from fleet_data.tasks.staging.journal import PLATE_LOOKUPS, AnswerJournal, read_journal, worth_landing
from fleet_data.tasks.land.landing import land_together, remove_staged, staged_at
from fleet_data.tasks.fetch.lanes import fetch_turn
from fleet_data.tasks.control.logtext import fields
from fleet_data.tasks.plan.due import Plan, due_rows, read_vins
from fleet_data.tasks.fetch.plates import look_up_plates
from fleet_data.tasks.ingest.plates import PlateLookups, lookup_keys
from fleet_data.tasks.land.plates import land_lookups
from fleet_data.tasks.outputs.preview import preview_refresh
from fleet_data.tasks.recalls.batches import BatchOptions, RecallOutcome, run_recall_batches
from fleet_data.tasks.recalls.details import DetailsOutcome, fetch_recall_details
from fleet_data.tasks.recalls.pipeline import DetailsProgress, check_recalls_and_details
from fleet_data.tasks.outputs.report import report_markdown
from fleet_data.tasks.land.shred import staged_tables
from fleet_data.tasks.staging.staged_chunk import StagedTables
from fleet_data.tasks.staging.staged_chunk import location as tables_location
from fleet_data.tasks.staging.staged_chunk import write as write_tables
from fleet_data.tasks.staging.attempts import EarlierAttempts, chunk_name
from fleet_data.tasks.staging.mirror import Mirror
from fleet_data.tasks.staging.area import StorageAccess, is_remote, journal_folder, opened, publish, storage_access
from fleet_data.tasks.outputs.summary import plan_text, summary_markdown
from fleet_data.tasks.run.summary import ChunkOutcome, PlateOutcome, RunSummary


class TaskOptions(TypedDict):  # typed per key, so mypy checks `@task(**TASK)` (a plain dict is dict[str, object])
    cache_policy: CachePolicy
    persist_result: bool
    retries: int


TASK: TaskOptions = dict(cache_policy=NONE, persist_result=False, retries=0)


@task(name="ingest-fleet", **TASK)
def ingest_fleet(paths: list[str], run_id: str, vin_column: str | None, parameters: dict,
                 plates: bool = True) -> dict[str, int]:
    """Read the fleet file(s) and land the roster and rejected rows; nothing lands if a file is unusable."""
    reporter = progress.current()
    reporter.start("ingest", "Reading fleet files", 1)
    counts = steps.ingest(current(run_id), read_fleet(paths, vin_column=vin_column), paths, parameters, plates,
                          prefect_flow_run_id=flow_run.id)
    reporter.finish("ingest")
    get_run_logger().info("ingested %s", fields(counts))
    return counts


@task(name="resolve-plates", **TASK)
def resolve_plates(run_id: str, waiting_path: str, look_up: bool, budget_left: int | None,
                   concurrency: int) -> PlateOutcome:
    """Look up the VINs behind the staged plates (one task; `concurrency` calls at a time) and land each row.

    With `look_up` false (a dry run, a refused plan) nothing is called: the rows are rejected as not
    looked up, and the next run asks for them.
    """
    waiting = pl.read_parquet(waiting_path)
    keys = lookup_keys(waiting)
    reporter = progress.current()
    run = current(run_id)
    journal = None
    if look_up:
        reporter.start("plates", "Plate lookups", len(keys))
        calls = _calls(run_id, concurrency, budget_left, "plates")
        # Each call journalled before it is sent: a kill leaves the calls and answers to the next run.
        journal = AnswerJournal.create(run.staging.answers, run_id, PLATE_LOOKUPS, secrets=(calls.settings.api_key or "",))
        with journal:
            lookups = asyncio.run(look_up_plates(keys, calls=calls, journal=journal))
    else:
        lookups = PlateLookups(not_looked_up=keys)
    outcome = land_lookups(run.store, run_id, waiting, lookups)
    if journal is not None:
        journal.delete()  # landed
    Path(waiting_path).unlink(missing_ok=True)  # settled: a second plan of this run has no plates left to price
    get_run_logger().info("plates: %s", fields(outcome))
    return outcome


@task(name="plan-refresh", **TASK)
def plan_refresh(run_id: str, datasets: list[str], force: bool, freshness: dict[str, str] | None,
                 printed: dict[str, int] | None = None) -> Plan:
    """The run's plan; `printed`: the first plan, when this one is made again with the vehicles plates found."""
    plan, recovered = steps.plan(current(run_id), datasets, force, freshness)
    if recovered["journals"]:
        get_run_logger().info("landed what earlier runs paid for and never landed: %s", fields(recovered))
    reporter = progress.current()
    text = plan_text(plan, printed)
    reporter.say(text)
    get_run_logger().info(text)
    for name, d in plan.datasets.items():
        if name != "recalls" and d.due:
            reporter.start(name, f"Fetching {name}", d.due)
    return plan


@task(name="plan-dry-run", **TASK)
def plan_dry_run(paths: list[str], options: RefreshOptions, run_id: str) -> dict[str, Any]:
    """The plan and its cost, from the published database read-only: a dry run writes nothing (tasks/outputs/preview.py)."""
    preview = preview_refresh(read_fleet(paths, vin_column=options.vin_column), options.db, run_id, options.datasets,
                              force=options.force, freshness=options.fresh or None, plates=options.plates,
                              max_units=options.max_units)
    progress.current().say(preview.plan)
    get_run_logger().info(preview.plan)
    create_markdown_artifact(markdown=summary_markdown(preview.summary), key="fleet-refresh-summary",
                             description=f"fleet refresh {run_id} (dry run)")
    return preview.summary


@task(name="check-recalls", **TASK)
def check_recalls(run_id: str, due_path: str | None, batch_size: int, webhook_url: str | None,
                  budget_left: int | None, webhook_listen: str | None = None,
                  details_concurrency: int | None = None) -> RecallsChecked:
    """The recall batches; with `details_concurrency`, each batch's campaign details (by VIN) start as its
    results land (tasks/recalls/pipeline.py), and their outcome is the answer's `details`."""
    vins = read_vins(due_path) if due_path else []
    reporter = progress.current()
    reporter.start("recalls", "Recall batches", len(vins))
    run = current(run_id)
    batches = BatchOptions(run.staging.batches, batch_size, webhook_url, webhook_listen, journals=run.staging.answers)
    details: DetailsOutcome | None = None
    db = run.store
    if details_concurrency is None:
        calls = _calls(run_id, 32, budget_left, "recalls")
        outcome = asyncio.run(run_recall_batches(db, run_id, vins, calls=calls, batches=batches))
    else:
        # Their total grows as each batch lands (a bar's total then: done never runs past it, issue 30).
        outcome, details = run_calls(check_recalls_and_details(
            db, run_id, vins, calls=_calls(run_id, details_concurrency, budget_left, "recalls"), batches=batches,
            journals=run.staging.answers, details_progress=DetailsProgress(
                done=lambda n: reporter.advance("recall_details", n),
                due=lambda n: reporter.start("recall_details", "Recall campaign details", n))))
    run.publish_if_due()
    get_run_logger().info("recall batches: %s", fields(outcome))
    if details is not None:
        get_run_logger().info("recall details: %s", fields(details))
    return RecallsChecked(outcome, details)


@task(name="fetch-recall-details", **TASK)
def recall_details(run_id: str, budget_left: int | None, concurrency: int, match: str = "vin") -> DetailsOutcome:
    reporter = progress.current()
    run = current(run_id)
    due = run.store.query("recall_details_due", run_id=run_id, batch_id=None).height
    reporter.start("recall_details", "Recall campaign details", due)
    outcome = run_calls(fetch_recall_details(
        run.store, run_id, calls=_calls(run_id, concurrency, budget_left, "recall_details"), match=match,
        journals=run.staging.answers,
    ))
    run.publish_if_due()
    get_run_logger().info("recall details: %s", fields(outcome))
    return outcome


def _calls(run_id: str, concurrency: int, budget_left: int | None, bar: str, settings: Settings | None = None) -> Calls:
    """How a task may call: the service's `settings` (default: from the environment of the flow's process), the
    run's stops, the budget left, `bar` advanced per answer (a no-op in another process: the flow advances
    it when the staged file lands)."""
    reporter = progress.current()
    return Calls(settings or client_settings(), concurrency, Budget(budget_left), stops.for_run(run_id),
                 lambda n: reporter.advance(bar, n))


class FetchAccess(BaseModel):
    """What a fetch task needs from the flow, wherever it runs (its threads, `--workers`, a Dask worker):
    where to stage, the service's settings and the staging credentials (secrets as `SecretStr`), the run's
    retry window. Nothing of it comes from the worker's own environment."""

    model_config = ConfigDict(frozen=True)

    staging: str  # the run's local answers folder, or an object-storage prefix (tasks/staging/area.py)
    service: ServiceAccess
    storage: StorageAccess | None = None
    retry_window: float | None = None
    quiet: bool = False  # the flow's process holds Prefect's tracebacks of a fault back (tasks/control/quiet.py)
    # On a Dask cluster a lost worker's task runs again elsewhere: a running chunk keeps a copy of its journal on the
    # object storage it stages on, for that re-run to read (tasks/staging/mirror.py).
    copies: bool = False
    stop_event: str | None = None  # on a Dask cluster: the Event the flow sets when the run stops (tasks/control/remote_stop.py)
    elsewhere: bool = False  # runs outside the flow's process (`--workers`, `--dask`): sends its log lines itself

    @classmethod
    def of_this_process(cls, staging: str, retry_window: float | None) -> "FetchAccess":
        """The flow's own settings: its environment's service (the sandbox's, a Secret block's key), its storage."""
        return cls(staging=staging, service=ServiceAccess.of(client_settings()), storage=storage_access(staging),
                   retry_window=retry_window, quiet=quiet.hiding())


def chunk_outcome(result: ChunkResult) -> ChunkOutcome:
    return ChunkOutcome(found=len(result.found), no_data=len(result.no_data), failed=len(result.failed),
                        pending=len(result.pending), calls=len(result.calls), units=result.units,
                        possible_units=result.possible_units, stop_reason=result.stop_reason)


class ChunkRows:
    """A chunk's due rows, handed to its fetch task as one value. Prefect walks the lists and dicts in a task's
    parameters looking for futures, twice per task run: every row's dict, a sixth of a 10,000 x 3 run's CPU at
    5,000 VINs a chunk. It never walks into other objects. (Its `quote` does the same, but a Dask worker's task
    got the wrapper itself.)"""

    __slots__ = ("rows",)

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows


@dataclass
class StagedChunk:
    """What a fetch task staged for the flow to land: where, its outcome, and the process that fetched it."""

    outcome: ChunkOutcome
    staged: str  # the chunk's journal (its typed tables beside it)
    earlier: list[str]  # the journals of the chunk's earlier attempts, landed first
    pid: int


@dataclass
class RecallsChecked:
    """The recall batches' outcome and, pipelined (`details_concurrency`), their campaign details'."""

    batches: RecallOutcome
    details: DetailsOutcome | None = None


def fetch_to_stage(run_id: str, dataset: str, rows: list[dict], concurrency: int, budget_left: int | None,
                   access: FetchAccess, offset: int | None = None) -> tuple[str, ChunkResult, list[str]]:
    """Fetch one chunk into its staged journal and typed tables; returns where the lander finds them, the chunk's
    result, and where the journals of the chunk's earlier attempts are (to land first). Opens no database.

    `access.staging` is the run's local answers folder, or an object-storage prefix (tasks/staging/area.py):
    then the journal is written in this machine's scratch folder (`tasks/staging/area.py` `journal_folder`) and put
    there once the chunk is done; a chunk killed before leaves it to the next run on this machine. A chunk run
    again (its worker lost: `offset` names it) asks only what its earlier attempts were not answered for
    (tasks/staging/attempts.py).
    """
    staging = access.staging
    folder = journal_folder(staging, run_id)
    stops.for_run(run_id).window.seconds = access.retry_window  # the flow's, in whatever process this runs
    resources.check(run_id)  # before each chunk: short of space, or the store gone, no call starts (its stops)
    earlier = EarlierAttempts.of(staging, run_id, dataset, offset, access.storage)
    with fetch_turn(run_id, dataset) as lane:  # retries still waiting may be handed to the next chunk
        calls = _calls(run_id, concurrency, budget_left, dataset, access.service.settings())
        with AnswerJournal.create(folder, run_id, dataset, chunk=chunk_name(dataset, offset),
                                  secrets=(calls.settings.api_key or "",)) as journal, \
                (Mirror(journal, staging, access.storage) if access.copies and is_remote(staging) else nullcontext()):
            unseen = earlier.unseen(dataset, rows)
            for intent in unseen:  # what a lost attempt may have sent after its last copy: in the ledger, unknown
                journal.sent(intent, now())
            result = run_calls(fetch_chunk(dataset, earlier.left(rows), calls=calls, journal=journal, lane=lane))
    earlier.add_to(result, unseen)
    # Stopped: no shredding now; the next run lands the journal, shredding it then (docs/stopping.md).
    typed = None if cancelled(run_id) else stage_tables(journal.path)
    staged = publish(journal.path, staging, run_id, access.storage)  # the journal first: typed tables never come without it
    if typed is not None:
        publish(typed, staging, run_id, access.storage)
    return staged, result, earlier.locations


def now() -> datetime:
    return datetime.now(timezone.utc)


def stage_tables(journal: Path) -> Path | None:
    """Shred a finished journal into the typed tables its chunk lands in, staged beside it (tasks/staging/staged_chunk.py),
    so the writer only upserts them. None when there is nothing to land, or when shredding failed: the
    lander then shreds the journal itself, and reports what fails."""
    read = read_journal(journal)
    if not worth_landing(read.table):
        return None
    try:
        tables = staged_tables(read.dataset, read.table)
        return write_tables(Path(tables_location(str(journal))), StagedTables(read.dataset, tables))
    except Exception as exc:  # noqa: BLE001 - the journal is whole: the lander can still shred it
        if resources.write_failed(read.run_id, exc):
            return None  # a full disk: the run is halted; the lander shreds the journal if it can
        _logger().warning("%s: typed tables not staged, the lander shreds the journal (%s)", journal.name, exc)
        return None


def _logger() -> Any:
    """The task's run logger; this module's logger where no run is (a fetch called directly)."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)


def land_staged(run_id: str, *staged: str) -> None:
    """Land staged chunks in one transaction, then delete their files (the flow's one writer does this).

    The typed tables the fetch staged land as they are; a journal without them is shredded first
    (land_together), wherever the chunk was fetched. A kill or a failed landing leaves the local files to the
    next run (`plan_refresh`).
    """
    failpoint("staged")  # crash tests: the chunk is staged (on S3 with --staging), not landed yet
    run = current(run_id)
    with ExitStack() as held:  # a remote file is downloaded for the landing; a local one memory-mapped
        chunks: list[tuple[str, pa.Table | StagedTables]] = []
        for location in staged:
            typed = held.enter_context(staged_at(location))
            if typed is not None:
                chunks.append((typed.dataset, typed))
                continue
            with opened(location) as path:
                journal = read_journal(path)
            if worth_landing(journal.table):
                chunks.append((journal.dataset, journal.table))
        if chunks:
            try:
                land_together(run.store, run_id, chunks)
            except Exception as exc:
                if not resources.write_failed(run_id, exc):
                    raise
                # The run is halted: no new call starts. The chunks stay staged for the next run to land.
                _logger().info("%s: not landed, the disk is full; it stays staged for the next run",
                               ", ".join(sorted({dataset for dataset, _ in chunks})))
                return
    failpoint("landed")  # crash tests: the chunks landed, their journals not yet deleted
    for location in staged:
        remove_staged(location)
    if chunks:
        run.publish_if_due()  # analysts see long runs' progress every few minutes


@task(name="land-chunk", task_run_name="land {dataset}", **TASK)
def land_staged_chunk(run_id: str, dataset: str, staged: list[str]) -> None:
    """Land chunks fetch tasks staged (`dataset`: what they answered, for the task's name), in one transaction."""
    land_staged(run_id, *staged)


@task(name="fetch-chunk", task_run_name="{dataset} {offset}+{length}", **TASK)
def fetch_staged_chunk(run_id: str, dataset: str, rows: ChunkRows, offset: int, length: int, concurrency: int,
                       budget_left: int | None, access: FetchAccess) -> StagedChunk:
    """Fetch one dataset for one slice of the due list into a staged file; opens no database.

    Runs in the flow's threads, in worker processes (`--workers`) or on a Dask cluster (`--dask`):
    the service, the key and the staging credentials come from the flow in `access` (never from the
    worker's environment), the answers go to `access.staging`. Returns the staged file's location, the
    chunk's counts and the process that fetched it.
    """
    if access.quiet:  # a `--workers` process: its terminal lines for a fault held back, as the flow's are
        quiet.install()
    with remote_stop.watched(run_id, access.stop_event):
        staged, result, earlier = fetch_to_stage(run_id, dataset, rows.rows, concurrency, budget_left, access, offset)
    outcome = chunk_outcome(result)
    get_run_logger().info("%s %d+%d: %s", dataset, offset, length, fields(outcome))
    if access.elsewhere:
        _send_logs()
    return StagedChunk(outcome, staged, earlier, os.getpid())


def _send_logs() -> None:
    """Send this process's Prefect log lines now, before the chunk's result reaches the flow. Its log worker sends
    them every 2 s; the flow may end sooner, and the temporary server with it: a Dask worker's lines were lost."""
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=5)


@task(name="fetch-chunk", task_run_name="{dataset} {offset}+{length}", **TASK)
def fetch_dataset_chunk(run_id: str, dataset: str, due_path: str | None, offset: int, length: int,
                        concurrency: int, budget_left: int | None) -> ChunkOutcome:
    """Fetch one dataset for one chunk of due VINs and land it (backfill's re-fetch; the refresh splits the two).

    Every answer is journalled in the run's staging folder as it arrives; the journal goes once the
    landing has committed. A kill or a failed landing leaves it to the next run (`plan_refresh`).
    """
    assert due_path is not None  # the plan's path, None only for a dataset with nothing due (so no chunk)
    run = current(run_id)
    access = FetchAccess.of_this_process(str(run.staging.answers), stops.for_run(run_id).window.seconds)
    staged, result, earlier = fetch_to_stage(run_id, dataset, due_rows(run.store, dataset, due_path, offset, length),
                                             concurrency, budget_left, access, offset)
    for location in [*earlier, staged]:
        land_staged(run_id, location)
    outcome = chunk_outcome(result)
    get_run_logger().info("%s %d+%d: %s", dataset, offset, length, fields(outcome))
    return outcome


@task(name="finish-run", **TASK)
def finish_refresh(run_id: str, summary: RunSummary, lake: str | None) -> dict[str, Any]:
    """Record the run and its per-dataset figures, export the lake, publish the summary artifact; returns the
    summary as it leaves the run (its JSON form)."""
    finished, report = steps.finish(current(run_id), summary, lake)
    _summary_artifact(run_id, summary.kind, summary_markdown(finished) + report_markdown(*report))
    return finished


def _summary_artifact(run_id: str, kind: str, markdown: str) -> None:
    """The run's summary in Prefect, unless its API is gone (tasks/control/prefect_api.py): the run is recorded
    already, and the command ends saying the API was lost."""
    if quiet.is_prefect_lost():
        return
    try:
        create_markdown_artifact(markdown=markdown, key=f"fleet-{kind}-summary", description=f"fleet {kind} {run_id}")
    except Exception:
        if not prefect_api.lost_now(run_id):
            raise


@task(name="notify-changes", **TASK)
def notify_changes(run_id: str, url: str, kind: str = "refresh") -> dict[str, Any]:
    """Post the run's changes to `url`, once; nothing when nothing changed. A failed post fails nothing.

    Bounded: each attempt and all of them end at their deadlines (FLEET_NOTIFY_ATTEMPT_SECONDS,
    FLEET_NOTIFY_SECONDS), and at once on SIGTERM/SIGINT; a run stopped before it got here posts nothing.
    """
    if cancelled(run_id):
        return {"sent": False, "reason": "cancelled: a stopped run posts nothing"}
    message = change_message(current(run_id).store, run_id, kind)
    if not message["total"]:
        return {"sent": False, "reason": "nothing changed"}
    deadlines = deadline_settings()
    retries = PostRetries(attempt_seconds=deadlines.notify_attempt_seconds, total_seconds=deadlines.notify_seconds)
    delivery = post_json(url, message, idempotency_key=f"fleet-changes-{run_id}", retries=retries,
                         secrets=(client_settings().api_key or "",), stop=lambda: cancelled(run_id))
    logger = get_run_logger()
    if delivery.sent:  # the target is scheme://host only: a webhook's path is often its credential
        logger.info("posted %d changes to %s", message["total"], delivery.target)
    else:
        logger.warning("could not post the changes to %s: %s", delivery.target, delivery.error)
    return delivery.to_dict()
