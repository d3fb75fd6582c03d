"""`fleet refresh`: the main job from the command line."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from typing import TYPE_CHECKING, Any

from tasks.plan.due import ALL_DATASETS, DEFAULT_DATASETS
from tasks.recalls.batches import MAX_BATCH_VINS

from .checks import CommandError, check_refresh
from .defaults import DEFAULT_DB, DEFAULT_LAKE, DEFAULT_VALUE_MOVE
from .exitcodes import CANCELLED

if TYPE_CHECKING:
    from tasks.control import progress
    from tasks.ingest.fleet_files import IngestResult

from .locking import add_wait_flag, hold_or_refuse
from .outcome import exit_code
from .target import service_settings


def add_refresh(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("refresh", help="turn fleet files into fresh analyst tables")
    p.add_argument("paths", nargs="+", metavar="PATH", help="CSV/Parquet files, folders or globs")
    # `fleet` fills the options flows/config.py knows: flag > FLEET_* > fleet.toml > these defaults.
    p.add_argument("--db", default=DEFAULT_DB, help=f"the published DuckDB file (default {DEFAULT_DB})")
    p.add_argument("--lake", default=DEFAULT_LAKE, help=f"Parquet export folder ('' to skip; default {DEFAULT_LAKE})")
    p.add_argument("--datasets", default=",".join(DEFAULT_DATASETS),
                   help=f"comma-separated, from: {', '.join(ALL_DATASETS)} (default: {','.join(DEFAULT_DATASETS)})")
    p.add_argument("--max-units", type=int, help="refuse a plan that costs more; stop cleanly when reached")
    p.add_argument("--force", action="store_true", help="ignore freshness: fetch every VIN again")
    p.add_argument("--dry-run", action="store_true", help="print the plan and its cost; make no call")
    p.add_argument("--json", action="store_true", help="print the summary (or the error) as JSON")
    p.add_argument("--vin-column", help="name of the VIN column when it cannot be recognised")
    p.add_argument("--fresh", action="append", default=[], metavar="DATASET=AGE",
                   help="freshness window, e.g. market_value=14d, or no_data=3d for 404 answers (repeatable)")
    p.add_argument("--chunk-size", type=int, default=500, help="VINs per task (default 500)")
    p.add_argument("--concurrency", type=int, default=32, help="calls in flight per dataset (default 32)")
    p.add_argument("--batch-size", type=int, default=MAX_BATCH_VINS,
                   help=f"VINs per recall batch (at most {MAX_BATCH_VINS:,}, the default)")
    p.add_argument("--recall-details", choices=("vin", "model"), default="vin",
                   help="campaigns of VINs with recalls: each VIN's own lookup (default), or its model's list "
                        "when the counts match (cheaper; marked likely, not confirmed)")
    p.add_argument("--webhook-url", help="https URL the service notifies when a recall batch finishes")
    p.add_argument("--webhook-listen", metavar="HOST:PORT",
                   help="receive that notification here (behind --webhook-url) instead of polling")
    p.add_argument("--plates", dest="plates", action="store_true", default=True,
                   help="look up VINs by plate for rows that have a plate and no VIN (the default)")
    p.add_argument("--no-plates", dest="plates", action="store_false",
                   help="do not look up VINs by plate for rows that have a plate and no VIN (they are rejected)")
    p.add_argument("--notify", metavar="URL",
                   help="post what changed to this webhook (JSON with a Slack-compatible text); nothing when nothing changed")
    p.add_argument("--value-move", type=float, default=DEFAULT_VALUE_MOVE, metavar="PERCENT",
                   help=f"a value that moved more than this from the vehicle's previous one is a change (default {DEFAULT_VALUE_MOVE:g})")
    p.add_argument("--workers", type=int, metavar="N",
                   help="fetch in N processes of this machine (default: the flow's threads); --concurrency is per process")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="fetch on an existing Dask cluster, e.g. tcp://10.0.0.5:8786 (its workers need VDS_API_KEY)")
    p.add_argument("--staging", metavar="URL",
                   help="stage fetched answers on object storage, e.g. s3://bucket/prefix (default: beside --db)")
    p.add_argument("--retry-window", metavar="DURATION",
                   help="once every first call is made, retries get this long more, then what still waits is "
                        "pending for the next run: seconds, or with s, m or h (default 3m; off: no bound)")
    add_wait_flag(p)
    p.set_defaults(run=run_refresh)


def check_scale_flags(args: argparse.Namespace) -> None:
    """--workers, --dask and --staging: refused in one line before anything starts."""
    if args.workers is not None and args.workers < 1:
        raise CommandError(f"--workers {args.workers}: give a number of processes of 1 or more")
    if args.dask is not None and "://" not in args.dask:
        raise CommandError(f"--dask {args.dask}: give the scheduler's address, e.g. tcp://127.0.0.1:8786")
    if args.staging is not None and "://" not in args.staging:
        raise CommandError(f"--staging {args.staging}: give an object-storage URL, e.g. s3://bucket/prefix")


def run_refresh(args: argparse.Namespace) -> int:
    from tasks.ingest.fleet_files import FleetFileError, read_fleet

    check_refresh(args)  # arguments, paths, settings: refused here, before anything is written or started
    check_scale_flags(args)
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    freshness = args.fresh
    try:
        # Refuse unusable files here, in a second, rather than after the sandbox and Prefect have
        # started, where the refusal would also come wrapped in Prefect's task-failure tracebacks.
        # Reading twice costs about 2 s per million rows, small beside any refresh that calls.
        fleet = read_fleet(args.paths, vin_column=args.vin_column)
    except FleetFileError as exc:
        raise CommandError(str(exc)) from None
    from tasks.run.context import new_run_id

    if args.dry_run:  # needs no lock, no service and no Prefect: the plan, from the published database read-only
        return _dry_run(args, fleet, datasets, freshness, new_run_id())
    # One run at a time: taken before the sandbox or Prefect start, so a refused run costs nothing.
    run_id = new_run_id()
    session = hold_or_refuse(args.db, run_id, "refresh", args.wait)
    if isinstance(session, int):
        return session
    with session:
        return _refresh_holding_lock(args, datasets, freshness, run_id, fleet)


def _dry_run(args: argparse.Namespace, fleet: IngestResult, datasets: list[str], freshness: dict[str, str],
             run_id: str) -> int:
    from tasks.outputs.preview import preview_refresh
    from tasks.store.database import DatabaseError
    from tasks.outputs.summary import report

    try:
        preview = preview_refresh(fleet, args.db, run_id, datasets, force=args.force, freshness=freshness or None,
                                  plates=args.plates, max_units=args.max_units)
    except (DatabaseError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    if not args.json:
        print(preview.plan, file=sys.stderr)
    report(preview.summary, args.json)
    return exit_code(preview.summary)


def _refresh_holding_lock(args: argparse.Namespace, datasets: list[str], freshness: dict[str, str],
                          run_id: str, fleet: IngestResult) -> int:
    from tasks.control import progress
    from tasks.ingest.fleet_files import FleetFileError
    from tasks.outputs.preview import preview_refresh
    from tasks.control.signals import RunCancelled, cancel_on_signals
    from tasks.store.database import DatabaseError
    from tasks.outputs.summary import report

    bars = progress.RichBars() if sys.stderr.isatty() and not args.json else None
    try:
        # A stop signal before the flow starts ends the command at once (nothing called); after, it cancels the run.
        with cancel_on_signals(run_id, started=False) as signals:
            # The plan first, from the published database read-only, while nothing has started yet.
            preview = preview_refresh(fleet, args.db, run_id, datasets, force=args.force, freshness=freshness or None,
                                      plates=args.plates, max_units=args.max_units)
            plan = preview.plan
            if not args.json:
                print(plan, file=sys.stderr, flush=True)
            # Nothing due: answered here, with no service and no Prefect server to start (tasks/steps/refresh_steps.py).
            idle = _answer_without_calls(args, run_id, datasets, freshness) if preview.nothing_due else None
            if idle is not None:
                report(idle, args.json)
                return exit_code(idle)
            # Worker processes (--workers) take the run's retry window from the environment they inherit.
            os.environ["FLEET_RETRY_WINDOW"] = "off" if math.isinf(args.retry_window) else str(args.retry_window)
            with service_settings():
                start_prefect()
                from .refresh import refresh_fleet  # imports Prefect: only once the files are known to be usable

                signals.started = True
                with bars or contextlib.nullcontext():
                    if bars:
                        progress.use(SaidOnce(bars, plan))
                    summary: dict[str, Any] = refresh_fleet(  # type: ignore[assignment]  # as_flow_run hides the type
                        args.paths, db=args.db, lake=args.lake or None, datasets=datasets, max_units=args.max_units,
                        force=args.force, vin_column=args.vin_column, freshness=freshness or None,
                        chunk_size=args.chunk_size, concurrency=args.concurrency, batch_size=args.batch_size,
                        webhook_url=args.webhook_url, webhook_listen=args.webhook_listen,
                        recall_details_by=args.recall_details, plates=args.plates, run_id=run_id,
                        notify=args.notify, value_move=args.value_move,
                        workers=args.workers, dask=args.dask, staging=args.staging,
                        retry_window=None if math.isinf(args.retry_window) else args.retry_window,
                    )
    except RunCancelled as exc:
        print(f"cancelled: {exc}", file=sys.stderr)
        return CANCELLED
    except (FleetFileError, DatabaseError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    finally:
        progress.use(progress.Silent())
    report(summary, args.json)
    return exit_code(summary)


def _answer_without_calls(args: argparse.Namespace, run_id: str, datasets: list[str],
                          freshness: dict[str, str]) -> dict[str, Any] | None:
    from tasks.run.context import current
    from tasks.steps.refresh_steps import answer_without_calls

    options = {"datasets": datasets, "force": args.force, "freshness": freshness or None, "vin_column": args.vin_column,
               "plates": args.plates, "lake": args.lake or None, "max_units": args.max_units, "dry_run": False,
               "chunk_size": args.chunk_size, "batch_size": args.batch_size, "recall_details_by": args.recall_details,
               "value_move": args.value_move}  # recorded as the run's parameters, as the flow records them
    return answer_without_calls(current(run_id), args.paths, options)


def start_prefect() -> None:
    """Start Prefect's temporary server (a child that dies with this command), saying so while it starts."""
    from prefect.settings import PREFECT_API_URL

    from .processes import start_prefect_server

    if PREFECT_API_URL.value():  # a server of its own: nothing to start
        start_prefect_server()
        return
    if sys.stderr.isatty():
        from rich.console import Console

        with Console(stderr=True).status("starting Prefect…"):
            start_prefect_server()
    else:
        print("starting Prefect…", file=sys.stderr, flush=True)
        start_prefect_server()


class SaidOnce:
    """A progress reporter that does not say again the plan the command printed before Prefect started."""

    def __init__(self, reporter: progress.Reporter, said: str):
        self._reporter, self._said = reporter, said
        self.start, self.advance, self.finish = reporter.start, reporter.advance, reporter.finish

    def say(self, text: str) -> None:
        if text != self._said:
            self._reporter.say(text)
