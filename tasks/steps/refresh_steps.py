"""The refresh's steps that need the store, as plain functions of the run context: no Prefect here.

The Prefect tasks (tasks/steps/refresh_tasks.py) are thin wrappers over these; a refresh with nothing
due runs them directly, without Prefect (`answer_without_calls`), so it costs no server start.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from fleet_data.connectors.keycheck import PATH as KEY_CHECK_PATH, KeyCheck
from fleet_data.tasks.control import memory, resources, stops
from fleet_data.tasks.control.failpoints import failpoint
from fleet_data.tasks.fetch.lanes import forget_run
from fleet_data.tasks.ingest.plates import PlateLookups, lookup_keys, settle_at_ingest
from fleet_data.tasks.land.plates import land_lookups
from fleet_data.tasks.ingest.fleet_files import IngestResult
from fleet_data.tasks.outputs.changes import lead_with_changes, run_changes
from fleet_data.tasks.outputs.report import write_run_report
from fleet_data.tasks.outputs.todo import todo_path
from fleet_data.tasks.run.summary import RunSummary
from fleet_data.tasks.plan.due import DueRule, Plan, make_plan, parse_freshness
from fleet_data.tasks.plan.provenance import check_store
from fleet_data.tasks.run.context import RunContext

from fleet_data.tasks.land.pending import DETAILS, record_left_pending
from fleet_data.tasks.settings import RefreshOptions, service_in_use
from fleet_data.tasks.land.recover import land_journals
from fleet_data.tasks.staging.journal import PLATE_LOOKUPS

RUN_DATASET_COLUMNS = {
    **{k: pl.Int64 for k in ("roster", "skipped_fresh", "planned", "estimated_units", "found", "no_data", "failed",
                             "pending", "units", "calls")},
    "not_applicable": pl.Int64,
    "stop_reason": pl.String,
}


def settle(run: RunContext, fleet: IngestResult, plates: bool) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, int]]:
    """The roster and rejected rows as they will land: plates needing no call settled, the rest staged for lookups.

    Plate lookups a killed run paid for land first (its journal): a plate it had answered is not bought again.
    """
    if not fleet.plates.height:
        return fleet.roster, fleet.rejected, fleet.summary()
    if plates:
        land_journals(run.store, run.staging.root, besides=run.run_id, store=run.staging.remote, only=(PLATE_LOOKUPS,))
    return settle_at_ingest(run.store, fleet, enabled=plates, waiting_path=run.staging.plates_waiting)


def ingest(run: RunContext, fleet: IngestResult, paths: list[str], parameters: dict, plates: bool,
           prefect_flow_run_id: Any = None) -> dict[str, int]:
    """Record the run and land the fleet's roster and rejected rows (plates needing no call settled here)."""
    db, service = run.store, service_in_use()
    check_store(db, run.db, service, bool(parameters.get("allow_clock_behind")))  # refused: nothing recorded
    db.start_run("refresh", [str(f) for f in fleet.files] or paths, parameters, run_id=run.run_id,
                 prefect_flow_run_id=prefect_flow_run_id, service=service)
    if run.key_check is not None:  # the command's key check, made before the run was recorded
        record_key_check(run, run.key_check)
        run.key_check = None
    failpoint("ingest")  # crash tests: the run is recorded, its roster not yet landed
    roster, rejected, counts = settle(run, fleet, plates)
    land_roster(run, roster, rejected)
    run.publish_if_due()
    return counts


def land_roster(run: RunContext, roster: pl.DataFrame, rejected: pl.DataFrame) -> None:
    """The roster and rejected rows, in one transaction; an allocation refused doing it is exit code 8."""
    with memory.guarded(memory.LAND):
        run.store.land_chunk({"vehicles": roster, "rejected_rows": rejected}, run.run_id)


def plan(run: RunContext, datasets: list[str], force: bool, freshness: dict[str, str] | None,
         roster: pl.DataFrame | None = None) -> tuple[Plan, dict[str, int]]:
    """What is due, after landing what earlier runs paid for and never landed; returns the plan and what was recovered.

    The run holds the lock, so it alone uses the staging area: answers a killed run left land first,
    under that run, so the plan counts them fresh; then its due lists, of no use now, go. With
    `--staging s3://...`, those left there too.
    """
    area = run.staging
    recovered = land_journals(run.store, area.root, besides=run.run_id, store=area.remote)
    area.remove_leftovers()
    rule = DueRule(force, parse_freshness(freshness), service=service_in_use())  # fresh only from the service called
    made = make_plan(run.store, run.run_id, datasets, area.run_dir, rule=rule,
                     plates_waiting=area.plates_waiting, roster=roster)
    run.planned = {name: d.path for name, d in made.datasets.items()}
    return made, recovered


def finish(run: RunContext, summary: RunSummary, lake: str | None) -> tuple[dict[str, Any], tuple[Any, Any]]:
    """Record the run and its per-dataset figures, export the lake, write the report; returns the summary as it
    leaves the run (its JSON form, the run's changes first) and the report."""
    run_id = run.run_id
    rows = [{"dataset": name, **{k: getattr(d, k) for k in RUN_DATASET_COLUMNS}} for name, d in summary.datasets.items()]
    details = summary.recall_details
    if details and details.due:
        rows.append({"dataset": "recall_details", "planned": details.due, "found": details.by_model + details.by_vin,
                     **{k: getattr(details, k) for k in ("failed", "pending", "calls", "units", "stop_reason")}})
    run.phase("finishing")
    if not run.may_publish() or run.watch.halted:  # halted (a full disk, store or lock gone, a service lost): failed
        kind, reason = run.watch.halted or (resources.NO_SPACE, "")
        summary.halt(reason, kind)
    db = run.store
    leave_pending(run, summary)
    if rows:
        db.land("run_datasets", pl.DataFrame(rows, schema={"dataset": pl.String, **RUN_DATASET_COLUMNS}), run_id)
    db.finish_run(run_id, summary.status, counts=summary.ingest, units_used=summary.units + summary.possible_units,
                  message=summary.message)
    if kept := run.staging.quarantined():  # damaged journals of any run, until a person deals with them
        summary.quarantined_journals, summary.quarantine_folder = len(kept), str(run.staging.quarantine_dir)
    finished = lead_with_changes(summary.as_json(), run_changes(db, run_id))  # recorded as its answers landed
    # A stopped run writes no lake and no report: the next run's export and report catch up with the
    # store (the lake compares fingerprints), and a stop must end in seconds (docs/stopping.md).
    # A failed run (a full disk, its store gone) was not published: no lake or report from it either.
    # A refused one called nothing, but it is a run: the lake's runs and roster say so, as the database does.
    done = summary.status not in ("planned", "refused", "cancelled", "failed")
    if lake and (done or summary.status == "refused"):
        db.export_parquet(lake, run_id=run_id)
    report = write_run_report(db, run.db, lake, run_id) if done else (None, None)  # recorded: the next one's period
    finished["report"] = str(report[0]) if report[0] else None
    finished["todo"] = str(todo_path(report[0])) if report[0] else None
    run.staging.finish()  # due lists are per run; answers not landed stay for the next run
    forget_run(run_id)
    stops.forget_run(run_id)
    return finished, report


def leave_pending(run: RunContext, summary: RunSummary) -> None:
    """Record what the run planned and left unsettled, each with its dataset's stop reason (tasks/land/pending.py).
    A refused plan called nothing and leaves nothing: its VINs are as they were."""
    if summary.status in ("refused", "planned") or not any(run.planned.values()) and "recalls" not in run.planned:
        return
    fallback = {"cancelled": stops.CANCELLED, "failed": summary.message}.get(summary.status)
    reasons = {name: d.stop_reason or fallback for name, d in summary.datasets.items()}
    recalls = summary.datasets.get("recalls")
    reasons[DETAILS] = ((summary.recall_details.stop_reason if summary.recall_details else None)
                        or (recalls.stop_reason if recalls else None) or fallback)
    record_left_pending(run.store, run.run_id, {d: p for d, p in run.planned.items() if p}, reasons,
                        details=summary.kind == "refresh" and "recalls" in run.planned)


@dataclass
class Ahead:
    """The plan a refresh makes from its working store once it holds the lock, before Prefect or the service:
    printed, and followed at once when nothing is due (`answer_without_calls`); the flow plans again otherwise."""

    plan: Plan
    roster: pl.DataFrame  # as it will land: plates needing no call settled
    rejected: pl.DataFrame
    counts: dict[str, int]  # the ingest's
    recovered: dict[str, int]  # what earlier runs paid for and never landed, landed by this plan


def plan_ahead(run: RunContext, fleet: IngestResult, options: RefreshOptions) -> Ahead:
    """The run's plan from the roster as read, before landing anything of this run: should something be due,
    nothing of it is recorded here and the flow runs. `fleet`: the files as the command read them, not read again."""
    roster, rejected, counts = settle(run, fleet, options.plates)  # plates needing a lookup are staged: the plan counts them
    made, recovered = plan(run, options.datasets, options.force, options.fresh or None, roster=roster)
    if not made.nothing_due:
        run.planned = {}  # what the run leaves pending is its flow's own plan, made once the run is recorded
    return Ahead(made, roster, rejected, counts, recovered)


def answer_without_calls(run: RunContext, fleet: IngestResult, paths: list[str], options: RefreshOptions,
                         ahead: Ahead) -> dict[str, Any]:
    """A refresh whose plan (`ahead`) has nothing due, answered in this process without Prefect."""
    # No call: the run records the service its plan found everything fresh for.
    run.store.start_run("refresh", [str(f) for f in fleet.files] or paths, options.run_parameters(), run_id=run.run_id,
                        service=service_in_use())
    land_roster(run, ahead.roster, ahead.rejected)
    summary = RunSummary.start(run.run_id, ahead.counts, ahead.plan)
    summary.end()
    return finish(run, summary, options.lake)[0]


def refuse_without_calls(run: RunContext, fleet: IngestResult, paths: list[str], options: RefreshOptions,
                         refused: str) -> dict[str, Any]:
    """A refresh whose key the service refused (connectors/keycheck.py), recorded in this process without Prefect.

    The run is what the flow would have made of it, minus the calls: recorded with its roster, everything it
    planned left pending with the refusal as the reason (`vin_status`), so the next run asks for it; rows
    waiting for a plate lookup rejected as not looked up, as a refused plan leaves them.
    """
    counts = ingest(run, fleet, paths, options.run_parameters(), options.plates)
    made, _ = plan(run, options.datasets, options.force, options.fresh or None)
    summary = RunSummary.start(run.run_id, counts, made)
    if made.plates:
        waiting = pl.read_parquet(made.plates.path)
        outcome = land_lookups(run.store, run.run_id, waiting, PlateLookups(not_looked_up=lookup_keys(waiting)))
        Path(made.plates.path).unlink(missing_ok=True)
        outcome.stop_reason = refused
        summary.add_plates(outcome)
    for name, dataset in summary.datasets.items():
        if dataset.planned:
            summary.leave_pending(name, dataset.planned, refused)
    summary.end()
    summary.calls += 1  # the check's own call, free: in the ledger too (record_key_check)
    summary.message = (f"the service refused the key ({refused}), answering a free check before anything "
                       f"started: nothing else was called; {summary.message or ''}")
    return finish(run, summary, options.lake)[0]


def record_key_check(run: RunContext, check: KeyCheck) -> None:
    """The key check's call in the call ledger, as every call is: free (a 400 or a refusal of the key costs no
    unit), or, with no answer, possibly billed for nothing (it asked about no VIN)."""
    answered = check.status is not None
    row = {"call_id": check.call_id, "endpoint": KEY_CHECK_PATH, "method": "GET", "status": check.status, "units": 0,
           "latency_ms": check.latency_ms, "attempt": 1, "error_message": check.error, "fetched_at": check.fetched_at,
           "replayed": False, "billing": "known" if answered else "unknown", "service": service_in_use()}
    run.store.land("api_calls", pl.DataFrame([row]), run.run_id)
