"""The refresh's Prefect tasks. Each is chunk-sized and takes and returns small values.

The work itself lives in plain modules (ingest, plan, enrich, recall_batches,
recall_details, landing); these wrappers open the process's one database
connection, read the service settings from the environment (never from
parameters, so the key is not recorded in Prefect), and report progress.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from pathlib import Path
from typing import Any, TypedDict

import polars as pl
import pyarrow as pa
from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE, CachePolicy
from prefect.exceptions import MissingContextError
from prefect.runtime import flow_run

from connectors import Settings

from tasks.control import progress
from tasks.run import session
from tasks.control import stops
from tasks.outputs.changes import lead_with_changes, run_changes
from tasks.fetch.enrich import Budget, ChunkResult, fetch_chunk
from tasks.control.failpoints import failpoint
from tasks.ingest.fleet_files import read_fleet
from tasks.staging.journal import AnswerJournal, answers_dir, has_journals, read_journal, worth_landing
from tasks.land.landing import land_answers, land_journals, remove_staged, staged_at
from tasks.fetch.lanes import fetch_turn, forget_run
from tasks.control.logtext import fields
from tasks.plan.due import make_plan, parse_freshness, read_slice, read_vins
from tasks.fetch.plates import PlateLookups, land_lookups, look_up_plates, lookup_keys, settle_at_ingest
from tasks.outputs.preview import preview_refresh
from tasks.fetch.recall_batches import run_recall_batches
from tasks.fetch.recall_details import DetailsOutcome, fetch_recall_details
from tasks.fetch.recall_pipeline import check_recalls_and_details
from tasks.outputs.report import report_markdown, write_run_report
from tasks.land.shred import staged_tables
from tasks.staging.staged_chunk import StagedTables
from tasks.staging.staged_chunk import location as tables_location
from tasks.staging.staged_chunk import write as write_tables
from tasks.staging.area import is_remote, opened, publish, scratch_root
from tasks.store.database import open_database
from tasks.outputs.summary import plan_text, summary_markdown


class TaskOptions(TypedDict):  # typed per key, so mypy checks `@task(**TASK)` (a plain dict is dict[str, object])
    cache_policy: CachePolicy
    persist_result: bool
    retries: int


TASK: TaskOptions = dict(cache_policy=NONE, persist_result=False, retries=0)
_RUN_DATASET_COLUMNS = {
    **{k: pl.Int64 for k in ("roster", "skipped_fresh", "planned", "estimated_units", "found", "no_data", "failed",
                             "pending", "units", "calls")},
    "not_applicable": pl.Int64,
    "stop_reason": pl.String,
}


def staging_dir(db_path: str, run_id: str) -> Path:
    return Path(db_path).resolve().parent / "staging" / run_id


def batches_dir(db_path: str) -> Path:
    """Batch VIN lists outlive a run: an interrupted batch is resumed by the next one."""
    return Path(db_path).resolve().parent / "staging" / "recall_batches"


def remove_leftover_staging(db_path: str, run_id: str) -> list[Path]:
    """Due lists other runs left behind; removed only by the run holding the lock (tasks/run/lock.py).

    Holding it, no other run is alive, so those lists are a killed run's, of no use (its plan is made
    again). Without it, they may be a live run's: left alone.
    """
    if not session.holding(db_path):
        return []
    removed = []
    for leftover in staging_dir(db_path, run_id).parent.glob("*"):
        if leftover.is_dir() and leftover != batches_dir(db_path) and leftover.name != run_id:
            shutil.rmtree(leftover, ignore_errors=True)
            removed.append(leftover)
    return removed


def plates_waiting(db_path: str, run_id: str) -> Path:
    """Rows with a plate instead of a VIN, staged by the ingest for the plate lookups."""
    return staging_dir(db_path, run_id) / "plates_waiting.parquet"


@task(name="ingest-fleet", **TASK)
def ingest_fleet(paths: list[str], db_path: str, run_id: str, vin_column: str | None, parameters: dict,
                 plates: bool = True) -> dict[str, int]:
    """Read the fleet file(s) and land the roster and rejected rows; nothing lands if a file is unusable."""
    reporter = progress.current()
    reporter.start("ingest", "Reading fleet files", 1)
    result = read_fleet(paths, vin_column=vin_column)
    with open_database(db_path) as db:
        db.start_run("refresh", [str(f) for f in result.files] or paths, parameters, run_id=run_id,
                     prefect_flow_run_id=flow_run.id)
        failpoint("ingest")  # crash tests: the run is recorded, its roster not yet landed
        roster, rejected, counts = result.roster, result.rejected, result.summary()
        if result.plates.height:  # settle what needs no call; stage the rest for resolve_plates
            roster, rejected, counts = settle_at_ingest(db, result, enabled=plates,
                                                        waiting_path=plates_waiting(db_path, run_id))
        db.land_chunk({"vehicles": roster, "rejected_rows": rejected}, run_id)
    session.publish_if_due(db_path)
    reporter.finish("ingest")
    get_run_logger().info("ingested %s", fields(counts))
    return counts


@task(name="resolve-plates", **TASK)
def resolve_plates(db_path: str, run_id: str, waiting_path: str, look_up: bool, budget_left: int | None,
                   concurrency: int) -> dict[str, Any]:
    """Look up the VINs behind the staged plates (one task; `concurrency` calls at a time) and land each row.

    With `look_up` false (a dry run, a refused plan) nothing is called: the rows are rejected as not
    looked up, and the next run asks for them.
    """
    waiting = pl.read_parquet(waiting_path)
    keys = lookup_keys(waiting)
    reporter = progress.current()
    if look_up:
        reporter.start("plates", "Plate lookups", len(keys))
        lookups = asyncio.run(look_up_plates(keys, settings=Settings.from_env(), concurrency=concurrency,
                                             budget=Budget(budget_left), on_progress=lambda n: reporter.advance("plates", n),
                                             stops=stops.for_run(run_id)))
    else:
        lookups = PlateLookups(not_looked_up=keys)
    with open_database(db_path) as db:
        outcome = land_lookups(db, run_id, waiting, lookups)
    Path(waiting_path).unlink(missing_ok=True)  # settled: a second plan of this run has no plates left to price
    get_run_logger().info("plates: %s", fields(outcome))
    return outcome


@task(name="plan-refresh", **TASK)
def plan_refresh(db_path: str, run_id: str, datasets: list[str], force: bool, freshness: dict[str, str] | None,
                 staging: str | None = None) -> dict:
    with open_database(db_path) as db:
        # The lock holder alone uses the staging area. Answers an earlier run paid for and never
        # landed (killed, or its landing failed) land first, under that run, so the plan counts them
        # fresh; then its due lists, of no use now, go. With `--staging s3://...`, those left there too.
        if session.holding(db_path):
            recovered = land_journals(db, staging_dir(db_path, run_id).parent, besides=run_id, store=staging)
            if recovered["journals"]:
                get_run_logger().info("landed what earlier runs paid for and never landed: %s", fields(recovered))
        remove_leftover_staging(db_path, run_id)
        plan = make_plan(db, run_id, datasets, staging_dir(db_path, run_id), force=force, freshness=parse_freshness(freshness),
                         plates_waiting=plates_waiting(db_path, run_id))
    reporter = progress.current()
    reporter.say(plan_text(plan))
    get_run_logger().info(plan_text(plan))
    for name, d in plan.datasets.items():
        if name != "recalls" and d.due:
            reporter.start(name, f"Fetching {name}", d.due)
    return plan.to_dict()


@task(name="plan-dry-run", **TASK)
def plan_dry_run(paths: list[str], db_path: str, run_id: str, vin_column: str | None, datasets: list[str], force: bool,
                 freshness: dict[str, str] | None, plates: bool, max_units: int | None) -> dict[str, Any]:
    """The plan and its cost, from the published database read-only: a dry run writes nothing (tasks/outputs/preview.py)."""
    preview = preview_refresh(read_fleet(paths, vin_column=vin_column), db_path, run_id, datasets, force=force,
                              freshness=freshness, plates=plates, max_units=max_units)
    progress.current().say(preview.plan)
    get_run_logger().info(preview.plan)
    create_markdown_artifact(markdown=summary_markdown(preview.summary), key="fleet-refresh-summary",
                             description=f"fleet refresh {run_id} (dry run)")
    return preview.summary


@task(name="check-recalls", **TASK)
def check_recalls(db_path: str, run_id: str, due_path: str | None, batch_size: int, webhook_url: str | None,
                  budget_left: int | None, webhook_listen: str | None = None,
                  details_concurrency: int | None = None) -> dict[str, Any]:
    """The recall batches; with `details_concurrency`, each batch's campaign details (by VIN) start as its
    results land (tasks/fetch/recall_pipeline.py), and their outcome is the answer's `details`."""
    vins = read_vins(due_path) if due_path else []
    reporter = progress.current()
    reporter.start("recalls", "Recall batches", len(vins))
    settings = Settings.from_env()
    options: dict[str, Any] = dict(settings=settings, batches_dir=batches_dir(db_path), batch_size=batch_size,
                                   webhook_url=webhook_url, webhook_listen=webhook_listen, budget=Budget(budget_left),
                                   stops=stops.for_run(run_id), on_progress=lambda n: reporter.advance("recalls", n))
    details: DetailsOutcome | None = None
    with open_database(db_path) as db:
        if details_concurrency is None:
            outcome = asyncio.run(run_recall_batches(db, run_id, vins, **options))
        else:
            reporter.start("recall_details", "Recall campaign details", db.query("recall_details_due", run_id=run_id, batch_id=None).height)
            outcome, details = asyncio.run(check_recalls_and_details(
                db, run_id, vins, concurrency=details_concurrency, journals=answers_dir(staging_dir(db_path, run_id)),
                on_details=lambda n: reporter.advance("recall_details", n), **options))
    session.publish_if_due(db_path)
    get_run_logger().info("recall batches: %s", fields(outcome))
    if details is None:
        return vars(outcome)
    get_run_logger().info("recall details: %s", fields(details))
    return vars(outcome) | {"details": vars(details)}


@task(name="fetch-recall-details", **TASK)
def recall_details(db_path: str, run_id: str, budget_left: int | None, concurrency: int, match: str = "vin") -> dict[str, Any]:
    reporter = progress.current()
    with open_database(db_path) as db:
        due = db.query("recall_details_due", run_id=run_id, batch_id=None).height
        reporter.start("recall_details", "Recall campaign details", due)
        outcome = asyncio.run(fetch_recall_details(
            db, run_id, settings=Settings.from_env(), budget=Budget(budget_left), concurrency=concurrency,
            stops=stops.for_run(run_id), on_progress=lambda n: reporter.advance("recall_details", n), match=match,
            journals=answers_dir(staging_dir(db_path, run_id)),
        ))
    session.publish_if_due(db_path)
    get_run_logger().info("recall details: %s", fields(outcome))
    return vars(outcome)


def chunk_counts(result: ChunkResult) -> dict[str, Any]:
    return {"found": len(result.found), "no_data": len(result.no_data), "failed": len(result.failed),
            "pending": len(result.pending), "calls": len(result.calls), "units": result.units,
            "stop_reason": result.stop_reason}


def fetch_to_stage(run_id: str, dataset: str, rows: list[dict], concurrency: int, budget_left: int | None,
                   staging: str) -> tuple[str, ChunkResult]:
    """Fetch one chunk into its staged journal and typed tables; returns where the lander finds them. Opens no
    database.

    `staging` is the run's local answers folder, or an object-storage prefix (tasks/staging/area.py):
    then the journal is written in this machine's scratch folder (`staging_store.scratch_root`) and put
    there once the chunk is done; a chunk killed before leaves it to the next run on this machine.
    """
    folder = answers_dir(scratch_root() / run_id) if is_remote(staging) else Path(staging)
    reporter = progress.current()  # a no-op in another process: the flow advances the bar when the file lands
    with fetch_turn(run_id, dataset) as lane:  # retries still waiting may be handed to the next chunk
        settings = Settings.from_env()
        with AnswerJournal.create(folder, run_id, dataset, secrets=(settings.api_key or "",)) as journal:
            result = asyncio.run(fetch_chunk(
                dataset, rows, settings=settings, concurrency=concurrency, budget=Budget(budget_left),
                stops=stops.for_run(run_id), on_progress=lambda n: reporter.advance(dataset, n), journal=journal,
                lane=lane,
            ))
    typed = stage_tables(journal.path)
    staged = publish(journal.path, staging, run_id)  # the journal first: typed tables never come without it
    if typed is not None:
        publish(typed, staging, run_id)
    return staged, result


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
        _logger().warning("%s: typed tables not staged, the lander shreds the journal (%s)", journal.name, exc)
        return None


def _logger() -> Any:
    """The task's run logger; this module's logger where no run is (a fetch called directly)."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)


def land_staged(db_path: str, run_id: str, staged: str) -> None:
    """Land one staged chunk in one transaction, then delete its files (the flow's one writer does this).

    The typed tables the fetch staged land as they are; a journal without them is shredded first
    (land_answers), wherever the chunk was fetched. A kill or a failed landing leaves a local file to the
    next run (`plan_refresh`).
    """
    failpoint("staged")  # crash tests: the chunk is staged (on S3 with --staging), not landed yet
    with staged_at(staged) as typed:
        answers: pa.Table | StagedTables | None = typed
        if typed is None:
            with opened(staged) as path:
                journal = read_journal(path)
            answers = journal.table if worth_landing(journal.table) else None
        dataset = typed.dataset if typed is not None else journal.dataset
        if answers is not None:
            with open_database(db_path) as db:
                land_answers(db, run_id, dataset, answers)
    failpoint("landed")  # crash tests: the chunk landed, its journal not yet deleted
    remove_staged(staged)
    if answers is not None:
        session.publish_if_due(db_path)  # analysts see long runs' progress every few minutes


@task(name="fetch-chunk", task_run_name="{dataset} {offset}+{length}", **TASK)
def fetch_staged_chunk(run_id: str, dataset: str, rows: list[dict], offset: int, length: int, concurrency: int,
                       budget_left: int | None, staging: str) -> dict[str, Any]:
    """Fetch one dataset for one slice of the due list into a staged file; opens no database.

    Runs in the flow's threads, in worker processes (`--workers`) or on a Dask cluster (`--dask`):
    the key comes from the environment, the answers go to `staging`. Returns the staged file's
    location, the chunk's counts and the process that fetched it.
    """
    staged, result = fetch_to_stage(run_id, dataset, rows, concurrency, budget_left, staging)
    counts = chunk_counts(result)
    get_run_logger().info("%s %d+%d: %s", dataset, offset, length, fields(counts))
    return {**counts, "staged": staged, "pid": os.getpid()}


@task(name="land-chunk", task_run_name="land {dataset}", **TASK)
def land_staged_chunk(db_path: str, run_id: str, dataset: str, staged: str) -> None:
    """Land a chunk a fetch task staged."""
    land_staged(db_path, run_id, staged)


@task(name="fetch-chunk", task_run_name="{dataset} {offset}+{length}", **TASK)
def fetch_dataset_chunk(db_path: str, run_id: str, dataset: str, due_path: str | None, offset: int, length: int,
                        concurrency: int, budget_left: int | None) -> dict[str, Any]:
    """Fetch one dataset for one chunk of due VINs and land it (backfill's re-fetch; the refresh splits the two).

    Every answer is journalled in the run's staging folder as it arrives; the journal goes once the
    landing has committed. A kill or a failed landing leaves it to the next run (`plan_refresh`).
    """
    assert due_path is not None  # the plan's path, None only for a dataset with nothing due (so no chunk)
    staged, result = fetch_to_stage(run_id, dataset, read_slice(due_path, offset, length), concurrency, budget_left,
                                    str(answers_dir(staging_dir(db_path, run_id))))
    land_staged(db_path, run_id, staged)
    counts = chunk_counts(result)
    get_run_logger().info("%s %d+%d: %s", dataset, offset, length, fields(counts))
    return counts


@task(name="finish-run", **TASK)
def finish_refresh(db_path: str, run_id: str, summary: dict[str, Any], lake: str | None) -> dict[str, Any]:
    """Record the run and its per-dataset figures, export the lake, publish the summary artifact."""
    rows = [{"dataset": name, **{k: d.get(k) for k in _RUN_DATASET_COLUMNS}} for name, d in summary["datasets"].items()]
    details = summary.get("recall_details")
    if details and details.get("due"):
        rows.append({"dataset": "recall_details", "planned": details["due"], "found": details["by_model"] + details["by_vin"],
                     **{k: details.get(k) for k in ("failed", "pending", "calls", "units", "stop_reason")}})
    session.phase(db_path, "finishing")
    with open_database(db_path) as db:
        if rows:
            db.land("run_datasets", pl.DataFrame(rows, schema={"dataset": pl.String, **_RUN_DATASET_COLUMNS}), run_id)
        db.finish_run(run_id, summary["status"], counts=summary["ingest"], units_used=summary["units"],
                      message=summary.get("message"))
        summary = lead_with_changes(summary, run_changes(db, run_id))  # recorded as its answers landed
        if lake and summary["status"] not in ("planned", "refused"):
            db.export_parquet(lake)
        report = write_run_report(db, db_path, lake) if summary["status"] not in ("planned", "refused") else (None, None)
        summary["report"] = str(report[0]) if report[0] else None
    if not has_journals(staging_dir(db_path, run_id)):  # answers not landed stay for the next run
        shutil.rmtree(staging_dir(db_path, run_id), ignore_errors=True)  # due lists are per run
    forget_run(run_id)
    stops.forget_run(run_id)
    kind = summary.get("kind", "refresh")
    create_markdown_artifact(markdown=summary_markdown(summary) + report_markdown(*report), key=f"fleet-{kind}-summary",
                             description=f"fleet {kind} {run_id}")
    return summary


