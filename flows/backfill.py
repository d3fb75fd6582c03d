"""`fleet backfill`: fetch chosen datasets again for chosen VINs or a run's failures; or re-parse.

Two flows that only orchestrate:
- `backfill_fleet` stages the VINs (given, or open failures of a run or of every run) and runs
  the refresh's own chunk task over them, then records the run like a refresh does;
- `reparse_raw_responses` rebuilds tables from `raw_responses` without calling the service.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any, TypedDict

from fleet_data.tasks.plan.due import ALL_DATASETS, DEFAULT_DATASETS
from fleet_data.tasks.settings import BackfillOptions
from fleet_data.tasks.datasets import LiveNames, names

from .config import add_flags
from fleet_data.tasks.exitcodes import CANCELLED
from .locking import add_wait_flag, hold_or_refuse
from .outcome import exit_code
from .target import service_settings

from .defaults import DEFAULT_DB
REPARSE_DATASETS = LiveNames(names)  # every dataset's stored answers can be re-parsed


class FlowOptions(TypedDict):  # typed per key, so mypy checks `flow(**options)` (a plain dict is dict[str, object])
    name: str
    persist_result: bool
    log_prints: bool


_FLOWS: dict[str, FlowOptions] = {
    "backfill_fleet": dict(name="fleet-backfill", persist_result=False, log_prints=False),
    "reparse_raw_responses": dict(name="fleet-reparse", persist_result=False, log_prints=False),
}


def __getattr__(name: str) -> Any:
    """`backfill_fleet` and `reparse_raw_responses` become Prefect flows on first use.

    Prefect reads its settings (log level included) when imported; `fleet` decides them after
    parsing arguments, and `fleet status` needs no Prefect at all, so this module must not import it.
    """
    if name not in _FLOWS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from prefect import flow

    from fleet_data.tasks.control.prefect_api import watched
    from fleet_data.tasks.run.context import holds_run_lock
    from fleet_data.tasks.control.signals import cancellable

    from .naming import as_flow_run, records_failure, run_name

    kind = "reparse" if name == "reparse_raw_responses" else "backfill"
    # Named after its run id, tagged, linked, recorded `failed` if it raises: as the refresh (flows/naming.py).
    built = flow(**_FLOWS[name], flow_run_name=run_name)(
        as_flow_run(holds_run_lock(kind)(records_failure(cancellable(watched(globals()[f"_{name}"])))),
                    needs_key=kind == "backfill"))
    globals()[name] = built
    return built


def _backfill_fleet(options: BackfillOptions | None = None, run_id: str | None = None) -> dict[str, Any]:
    """Fetch `options.datasets` again for the chosen VINs (tasks/settings.py `BackfillOptions`)."""
    from fleet_data.tasks.steps.backfill_tasks import FETCHED_AS, plan_backfill, record_recall_checks
    from fleet_data.tasks.plan.backfill import chosen_datasets, vin_counts
    from fleet_data.tasks.steps.refresh_tasks import fetch_dataset_chunk, finish_refresh

    from fleet_data.tasks.control.signals import cancelled
    from fleet_data.tasks.control.stops import CANCELLED
    from fleet_data.tasks.run.summary import RunBudget, RunSummary

    from fleet_data.tasks.run.context import new_run_id

    from .refresh import ORDER

    run_id = run_id or new_run_id()
    options = options or BackfillOptions()
    datasets, vins = options.datasets, options.vins
    by_failures = vins is None and options.vins_file is None
    chosen = list(datasets or (ALL_DATASETS if by_failures else DEFAULT_DATASETS))
    parameters = {**options.run_parameters(), "datasets": chosen}
    plan = chosen_datasets(datasets, by_failures, plan_backfill(
        run_id, chosen, vins, options.vins_file, options.failures_of, options.all_failures, parameters))
    summary = RunSummary.start(run_id, vin_counts(plan), plan, kind="backfill")
    if refused := plan.refusal(options.max_units):  # before any call, as a refresh refuses (exit code 4)
        summary.refuse(refused)
        return finish_refresh(run_id, summary, options.lake)

    budget = RunBudget(options.max_units)  # one task at a time, always: each sees what the ones before it left
    for dataset in (d for d in ORDER if d in plan.datasets):
        due = plan.datasets[dataset]
        for offset, length in due.chunks(options.chunk_size):
            if summary.datasets[dataset].stop_reason or cancelled(run_id):
                summary.leave_pending(dataset, length, CANCELLED)
                continue
            outcome = fetch_dataset_chunk(run_id, FETCHED_AS.get(dataset, dataset), due.path, offset, length,
                                          options.concurrency, budget.left)
            summary.add_chunk(dataset, outcome, budget)
    if "recalls" in plan.datasets and plan.datasets["recalls"].due:
        record_recall_checks(run_id)

    summary.end(cancelled=cancelled(run_id))
    return finish_refresh(run_id, summary, options.lake)


def _reparse_raw_responses(
    db: str = DEFAULT_DB,
    datasets: list[str] | None = None,
    lake: str | None = None,
    chunk_size: int = 1000,
    run_id: str | None = None,
) -> dict[str, Any]:
    """Rebuild the tables of `datasets` from stored raw answers (after a model or schema change); no HTTP call."""
    from fleet_data.tasks.steps.backfill_tasks import reparse_chunk, start_reparse
    from fleet_data.tasks.steps.refresh_tasks import finish_refresh
    from fleet_data.tasks.control.signals import cancelled
    from fleet_data.tasks.run.summary import ChunkOutcome, DatasetFigures, RunSummary

    from fleet_data.tasks.run.context import new_run_id

    run_id = run_id or new_run_id()
    chosen = list(datasets or REPARSE_DATASETS)
    held = start_reparse(run_id, chosen, {"datasets": chosen, "chunk_size": chunk_size})
    summary = RunSummary(run_id, kind="reparse")
    skipped = 0
    for dataset in chosen:
        counts = summary.datasets[dataset] = DatasetFigures(roster=held[dataset], planned=held[dataset])
        for offset in range(0, held[dataset], chunk_size):
            if cancelled(run_id):  # what is re-parsed stays; the rest keeps its rows as they were
                counts.pending += min(chunk_size, held[dataset] - offset)
                continue
            parsed = reparse_chunk(run_id, dataset, offset, min(chunk_size, held[dataset] - offset))
            counts.add(ChunkOutcome(found=parsed["found"], no_data=parsed["skipped"], failed=parsed["failed"]))
            skipped += parsed["skipped"]
    if skipped:
        summary.message = (f"{skipped} stored answers not re-parsed (model-wide recall listings: "
                           "which VINs they settled is not part of the answer)")
    failed = sum(d.failed for d in summary.datasets.values())
    summary.status = "cancelled" if cancelled(run_id) else "partial" if failed else "completed"
    return finish_refresh(run_id, summary, lake)


# -- the command --------------------------------------------------------------------------------
def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("backfill", help="fetch chosen datasets again for chosen VINs or failures; or re-parse")
    # --db, --lake, --concurrency, --chunk-size, --max-units: from the model (tasks/settings.py), filled by
    # flows/config.py (flag > FLEET_* > fleet.toml > default).
    add_flags(p, "backfill")
    p.add_argument("--datasets", help=f"comma-separated, from: {', '.join(ALL_DATASETS)} "
                                      f"(default: those with failures, or {','.join(DEFAULT_DATASETS)} for --vins)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--vins", action="append", default=[], metavar="VIN,...", help="VINs (repeatable)")
    which.add_argument("--vins-file", metavar="PATH", help="text/CSV file (one VIN a line or a 'vin' column) or Parquet")
    which.add_argument("--failures-of", metavar="RUN_ID", help="the open failures of this run")
    which.add_argument("--failures", action="store_true", help="every open failure, of every run")
    p.add_argument("--reparse", action="store_true",
                   help="rebuild tables from stored raw responses (no call to the service)")
    p.add_argument("--json", action="store_true", help="print the summary (or the error) as JSON")
    add_wait_flag(p)
    p.set_defaults(run=run_backfill)


def run_backfill(args: argparse.Namespace) -> int:
    from fleet_data.tasks.store import files as store
    from fleet_data.tasks.run.context import new_run_id

    from .checks import check_backfill, datasets as check_datasets

    datasets = check_datasets(args.datasets, REPARSE_DATASETS if args.reparse else ALL_DATASETS) or None
    chosen = [bool(args.vins), bool(args.vins_file), bool(args.failures_of), args.failures]
    if args.reparse and any(chosen):
        return _fail("--reparse re-parses every stored answer of the datasets; it takes no VINs or failures")
    if not args.reparse and not any(chosen):
        return _fail("choose VINs: --vins, --vins-file, --failures-of RUN_ID or --failures (or --reparse)")
    if args.reparse and args.dry_run:
        return _fail("--reparse calls nothing and costs nothing: there is no plan to print (--dry-run)")
    check_backfill(args)  # counts, paths, settings: refused before the lock, a database or Prefect
    needs_db = args.reparse or args.failures_of or args.failures
    if needs_db and not store.exists(args.db):
        return _fail(f"{args.db}: no such database (run `fleet refresh` first)")
    if args.dry_run:  # no lock, no service, no Prefect: the plan, from the published database read-only
        return _dry_run(args, datasets)
    # One run at a time, taken before Prefect is even imported (tasks.backfill imports it).
    run_id = new_run_id()
    session = hold_or_refuse(args.db, run_id, "reparse" if args.reparse else "backfill", args.wait)
    if isinstance(session, int):
        return session
    with session:
        return _backfill_holding_lock(args, datasets, run_id)


def _dry_run(args: argparse.Namespace, datasets: list[str] | None) -> int:
    """`fleet backfill --dry-run`: the plan and its cost, as `fleet refresh --dry-run` prints one; nothing written."""
    from fleet_data.tasks.outputs.preview import preview_backfill
    from fleet_data.tasks.outputs.summary import report
    from fleet_data.tasks.plan.backfill import read_vins_file
    from fleet_data.tasks.run.context import new_run_id
    from fleet_data.tasks.store.database import DatabaseError

    given = [v for item in args.vins for v in item.split(",") if v.strip()] or None
    try:
        if args.vins_file:
            given = read_vins_file(args.vins_file)
        preview = preview_backfill(args.db, new_run_id(), datasets, vins=given, failures_of=args.failures_of,
                                   all_failures=args.failures, max_units=args.max_units)
    except (ValueError, DatabaseError) as exc:
        return _fail(str(exc))
    if not args.json:
        print(preview.plan, file=sys.stderr)
    report(preview.summary, args.json)
    return exit_code(preview.summary)


def _backfill_holding_lock(args: argparse.Namespace, datasets: list[str] | None, run_id: str) -> int:
    from fleet_data.tasks.store.database import DatabaseError

    try:
        checked = _check_what_to_do(args, datasets, run_id)
    except (ValueError, DatabaseError) as exc:
        return _fail(str(exc))
    if isinstance(checked, int):
        return checked
    vins, idle = checked
    if idle:  # answered without a service, a flow or Prefect, and recorded as no run
        if args.json:
            print(json.dumps({"kind": "reparse" if args.reparse else "backfill", "status": "nothing to do",
                              "message": idle, "calls": 0, "units": 0}, indent=2))
        else:
            print(f"nothing to do: {idle}")
        return 0
    return _run_flow(args, datasets, run_id, vins)


def _check_what_to_do(args: argparse.Namespace, datasets: list[str] | None,
                      run_id: str) -> int | tuple[list[str] | None, str | None]:
    """The VINs to backfill (checked against the roster) and why there is nothing to do, if so; an exit code
    when the request cannot be done."""
    from fleet_data.tasks.run.context import current

    vins = None
    db = current(run_id).store  # the run context's store, held since the lock was taken
    if args.vins or args.vins_file:
        from fleet_data.tasks.steps.backfill_tasks import check_vins, read_vins_file  # imports Prefect: a flow will run

        given = [v for item in args.vins for v in item.split(",") if v.strip()]
        if args.vins_file:
            given = read_vins_file(args.vins_file)
        vins, refused = check_vins(db, given)
        if refused:
            return _fail("not on the roster and not valid VINs: "
                         + ", ".join(f"{raw} ({reason})" for raw, reason in refused))
        if not vins:
            return _fail("no VINs given")
    if args.failures_of and not db.query("run_started_at", run_id=args.failures_of).height:
        return _fail(f"no run {args.failures_of!r} in {args.db}")
    return vins, _nothing_to_do(db, args, datasets, current(run_id).staging.root)


def _run_flow(args: argparse.Namespace, datasets: list[str] | None, run_id: str, vins: list[str] | None) -> int:
    from fleet_data.tasks.control import progress
    from fleet_data.tasks.control.signals import RunCancelled, cancel_on_signals
    from fleet_data.tasks.outputs.summary import report
    from fleet_data.tasks.store.database import DatabaseError

    from .commands import lost_service

    bars = progress.for_stderr(args.json)  # bars on a terminal, plain lines in a log, none with --json
    try:
        with cancel_on_signals(run_id, started=False) as signals:  # before the flow: ends the command at once
            # Re-parsing calls nothing, so it needs no service (and starts no sandbox).
            from .commands import prefect_api_answers, start_prefect

            prefect_api_answers()  # a standing Prefect server named and down: one line now, before any call
            target = contextlib.nullcontext() if args.reparse else service_settings()
            with target:
                start_prefect(args.verbose)
                signals.started = True
                with bars or contextlib.nullcontext():
                    if bars:
                        progress.use(bars)
                    flows = sys.modules[__name__]
                    if args.reparse:
                        summary = flows.reparse_raw_responses(args.db, datasets, lake=args.lake or None,
                                                              chunk_size=args.chunk_size, run_id=run_id)
                    else:
                        summary = flows.backfill_fleet(BackfillOptions(
                            db=args.db, lake=args.lake, datasets=datasets, vins=None if args.vins_file else vins,
                            vins_file=str(Path(args.vins_file).resolve()) if args.vins_file else None,
                            failures_of=args.failures_of, all_failures=args.failures, max_units=args.max_units,
                            chunk_size=args.chunk_size, concurrency=args.concurrency), run_id=run_id)
    except RunCancelled as exc:
        print(f"cancelled: {exc}", file=sys.stderr)
        return CANCELLED
    except (DatabaseError, ValueError) as exc:
        return _fail(str(exc))
    except Exception as exc:
        if (lost := lost_service(run_id)) is None:
            raise
        raise lost from exc  # Prefect's end of a run whose server was lost failed too: the loss is what is said
    finally:
        progress.use(progress.Silent())
    if summary.get("failure") or (lost := lost_service(run_id)) is None:
        report(summary, args.json)
    else:
        raise lost  # Prefect's API lost as the run ended: recorded, not reported there

    return exit_code(summary)


def _nothing_to_do(db: Any, args: argparse.Namespace, datasets: list[str] | None, staging: Path) -> str | None:
    """Why a backfill of failures, or a re-parse, has nothing to do (None when it has something).

    The same queries the flows plan with (`failed_vins`, `raw_response_counts`). Answers a killed run
    left in its journals could hold failures: while any wait to land, the flow runs (and lands them).
    """
    from fleet_data.tasks.staging.journal import leftover_journals

    if next(leftover_journals(staging), None) is not None:  # the run context's staging area
        return None
    if args.reparse:
        held = dict(db.query("raw_response_counts").iter_rows())
        if any(held.get(d) for d in datasets or REPARSE_DATASETS):
            return None
        return f"no stored answers of {', '.join(datasets or REPARSE_DATASETS)} to re-parse in {args.db}"
    if args.failures or args.failures_of:
        if db.query("failed_vins", run_id=args.failures_of, datasets=list(datasets or ALL_DATASETS)).height:
            return None
        of = f"run {args.failures_of}" if args.failures_of else "any run"
        return f"no open failures of {of} in {args.db}" + (f" for {', '.join(datasets)}" if datasets else "")
    return None


def _fail(message: str) -> int:
    from .checks import CommandError

    raise CommandError(message)  # printed by flows.cli, as text or JSON; exit code 2
