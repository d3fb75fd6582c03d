"""`fleet refresh`: the main job from the command line."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from typing import TYPE_CHECKING, Any

from fleet_data.tasks.errors import UsageError
from fleet_data.tasks.settings import RefreshOptions, exported

from .checks import CommandError, check_refresh, check_refresh_store
from .config import add_flags
from fleet_data.tasks.exitcodes import CANCELLED

if TYPE_CHECKING:
    from fleet_data.connectors.config import Settings
    from fleet_data.tasks.run.context import RunContext
    from fleet_data.tasks.control import progress
    from fleet_data.tasks.control.resources import Watch
    from fleet_data.tasks.ingest.fleet_files import IngestResult

from .locking import add_wait_flag, hold_or_refuse
from .outcome import exit_code
from .target import service_settings


def add_refresh(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("refresh", help="turn fleet files into fresh analyst tables")
    p.add_argument("paths", nargs="+", metavar="PATH", help="CSV/Parquet files, folders or globs")
    # Every option's flag comes from the model (tasks/settings.py): flag > FLEET_* > fleet.toml > its default.
    add_flags(p, "refresh")
    p.add_argument("--json", action="store_true", help="print the summary (or the error) as JSON")
    add_wait_flag(p)
    p.set_defaults(run=run_refresh)


def refresh_options(args: argparse.Namespace) -> RefreshOptions:
    """The run's options from the parsed command line (every one already filled and checked by flows/config.py)."""
    return RefreshOptions.model_validate({name: getattr(args, name) for name in RefreshOptions.model_fields})


def run_refresh(args: argparse.Namespace) -> int:
    check_refresh(args)  # paths, addresses, settings: refused here, before anything is written or started
    options = refresh_options(args)
    if options.dry_run:  # needs no lock, no service and no Prefect: the plan, from the published database read-only
        check_refresh_store(args)
        from fleet_data.tasks.run.context import new_run_id

        return _dry_run(args, options, _fleet(args, options), new_run_id())
    # Prefect's server starts now, beside checking the store, reading the files, the lock and the plan, before it is
    # needed: a first command waits for it. One that ends up calling nothing (the store or a file refused, nothing
    # due, the lock or the key refused) stops it (`abandon_prefect`). Launched before DuckDB, polars and Arrow load.
    launch_prefect()
    try:
        check_refresh_store(args)
        from fleet_data.tasks.run.context import new_run_id

        return _refresh(args, options, _fleet(args, options), new_run_id())
    finally:
        abandon_prefect()


def _fleet(args: argparse.Namespace, options: RefreshOptions) -> IngestResult:
    from fleet_data.tasks.ingest.fleet_files import FleetFileError, read_fleet

    try:
        # Refuse unusable files here, in a second, rather than after the sandbox and Prefect's flow have
        # started, where the refusal would also come wrapped in Prefect's task-failure tracebacks.
        # Reading twice costs about 2 s per million rows, small beside any refresh that calls.
        return read_fleet(args.paths, vin_column=options.vin_column)
    except FleetFileError as exc:
        raise CommandError(str(exc)) from None


def _refresh(args: argparse.Namespace, options: RefreshOptions, fleet: IngestResult, run_id: str) -> int:
    # One run at a time: taken before the sandbox starts or anything is called, so a refused run costs nothing.
    session = hold_or_refuse(options.db, run_id, "refresh", args.wait)
    if isinstance(session, int):
        return session
    with session:
        _room_to_run(session.context.watch, options)
        try:
            outcome = _refresh_holding_lock(args, options, run_id, fleet)
        finally:
            _key_check_in_ledger(session.context)
    # Said once the session has ended: its last publish can still halt the run (its lock or store gone, the
    # disk full), which then ends in one error line, never after a summary that said it completed.
    if isinstance(outcome, int):
        return outcome
    from fleet_data.tasks.outputs.summary import report

    report(outcome, args.json)
    return exit_code(outcome)


def _room_to_run(watch: Watch, options: RefreshOptions) -> None:
    """The disks the run writes have room before anything is called, or the command stops here (exit code 6)."""
    from fleet_data.tasks.control.resources import ResourceLost

    watch.place("lake", options.lake)
    if watch.check() and watch.halted:
        raise ResourceLost(watch.halted[1], watch.halted[0])


def _preview(fleet: IngestResult, options: RefreshOptions, run_id: str) -> Any:
    from fleet_data.tasks.outputs.preview import preview_refresh

    return preview_refresh(fleet, options.db, run_id, options.datasets, force=options.force,
                           freshness=options.fresh or None, plates=options.plates, max_units=options.max_units)


def _dry_run(args: argparse.Namespace, options: RefreshOptions, fleet: IngestResult, run_id: str) -> int:
    from fleet_data.tasks.store.database import DatabaseError
    from fleet_data.tasks.outputs.summary import report

    try:
        preview = _preview(fleet, options, run_id)
    except (DatabaseError, UsageError) as exc:  # ours only: any other ValueError is a bug, said as one
        raise CommandError(str(exc)) from None
    if not args.json:
        print(preview.plan, file=sys.stderr)
    report(preview.summary, args.json)
    return exit_code(preview.summary)


def _refresh_holding_lock(args: argparse.Namespace, options: RefreshOptions, run_id: str,
                          fleet: IngestResult) -> dict[str, Any] | int:
    """The run's summary, to be said once its session ends; an exit code when it ends otherwise."""
    from fleet_data.tasks.control import progress
    from fleet_data.tasks.control.signals import RunCancelled, cancel_on_signals
    from fleet_data.tasks.store.database import DatabaseError

    bars = progress.for_stderr(args.json)  # bars on a terminal, plain lines in a log, none with --json
    window = "off" if options.retry_window is None else str(options.retry_window)
    try:
        # A stop signal before the flow starts ends the command at once (nothing called); after, it cancels the run.
        # Worker processes (--workers) take the run's retry window from the environment they inherit.
        with cancel_on_signals(run_id, started=False) as signals, exported(FLEET_RETRY_WINDOW=window):
            # The plan first, from the working store, while nothing has started yet.
            ahead, preview = _plan_ahead(fleet, args, options, run_id)
            if not args.json:
                print(preview.plan, file=sys.stderr, flush=True)
            if preview.nothing_due:  # answered here, with no service and no Prefect server
                abandon_prefect()  # at once: its start would take CPU from the answer
                return _answer_without_calls(fleet, args, options, run_id, ahead)
            plan = preview.plan
            # One free call first: a key the service refuses is said in a second, not after Prefect's start (with
            # --dask, once the cluster is known to work: one that cannot is refused before any call). Not for a plan
            # --max-units refuses: that calls nothing.
            check = preview.summary["status"] != "refused"
            prefect_api_answers()  # a standing Prefect server named and down: one line now, before any call
            with service_settings() as service:
                if (refused := _start_calling(service, check, run_id, fleet, args, options)) is not None:
                    return refused
                from .refresh import refresh_fleet  # imports Prefect: only once the files are known to be usable

                signals.started = True
                with bars or contextlib.nullcontext():
                    if bars:
                        progress.use(SaidOnce(bars, plan))
                    # as_flow_run hides the type
                    summary: dict[str, Any] = refresh_fleet(args.paths, options, run_id=run_id)  # type: ignore[assignment]
                summary["calls"] += check  # the key check's, free (connectors/keycheck.py): the ledger has it too
    except RunCancelled as exc:
        print(f"cancelled: {exc}", file=sys.stderr)
        return CANCELLED
    except (DatabaseError, UsageError) as exc:  # ours only (a FleetFileError, a RunRefused...): not any ValueError
        from fleet_data.tasks.control.resources import is_disk_full

        if is_disk_full(exc):
            raise  # the machine's fault, not the input's: flows/cli.py says so, with its own exit code
        raise CommandError(str(exc)) from None
    except Exception as exc:
        if (lost := lost_service(run_id)) is None:
            raise
        raise lost from exc  # Prefect's end of a run whose server was lost failed too: the loss is what is said
    finally:
        progress.use(progress.Silent())
    return _unless_halted(summary, run_id)


def _unless_halted(summary: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The run's summary, or, halted, its one line and code (a full disk, its store or lock gone, a service lost)."""
    from fleet_data.tasks.control.resources import ResourceLost

    if summary.get("failure"):
        raise ResourceLost(summary["message"], summary["failure"])
    if (lost := lost_service(run_id)) is not None:  # Prefect's API lost as the run ended: recorded, not reported there
        raise lost
    return summary


def lost_service(run_id: str) -> BaseException | None:
    """The run's halt for a service lost (tasks/control/services.py), if it was halted so: what ends the command then,
    whatever Prefect raised afterwards (its flow run's end, sent to the lost server, fails too)."""
    from fleet_data.tasks.control.resources import SERVICE_LOST, ResourceLost, halted

    halt = halted(run_id)
    return ResourceLost(halt[1], halt[0]) if halt and halt[0] == SERVICE_LOST else None


def _start_calling(service: Settings, check: bool, run_id: str, fleet: IngestResult, args: argparse.Namespace,
                   options: RefreshOptions) -> dict[str, Any] | None:
    """The key check (`check`), Prefect started and a Dask cluster checked, in that order; the run's summary if
    the key was refused (with --dask the cluster first: one that cannot fetch is refused before any call)."""
    if check and not options.dask and (refused := _refused_key(service, run_id, fleet, args, options)):
        return refused
    start_prefect(args.verbose)
    if options.dask:  # its workers run this fleet-data and reach this Prefect: checked before any call
        from .fetchers import check_cluster_at

        check_cluster_at(options.dask, options.staging)
        if check and (refused := _refused_key(service, run_id, fleet, args, options)):
            return refused
    return None


def _key_check_in_ledger(run: RunContext) -> None:
    """The key check of a run never recorded (stopped or failed before its flow started): its call goes in the
    ledger all the same, as every call does. Best effort: what ended the command is what it says."""
    if run.key_check is None:
        return
    from fleet_data.tasks.steps.refresh_steps import record_key_check

    try:
        record_key_check(run, run.key_check)
    except Exception:  # noqa: BLE001 - a store that failed the run may fail this too; the run's error is what counts
        return
    run.key_check = None


def _refused_key(service: Settings, run_id: str, fleet: IngestResult, args: argparse.Namespace,
                 options: RefreshOptions) -> dict[str, Any] | None:
    """The run's summary when the service refuses the key (connectors/keycheck.py), recorded without Prefect;
    None when the run goes ahead (the key taken, or no verdict). The check's call is in the ledger either way."""
    from fleet_data.connectors.keycheck import check_key
    from fleet_data.tasks.run.context import current
    from fleet_data.tasks.steps.refresh_steps import refuse_without_calls

    check, run = check_key(service), current(run_id)
    run.key_check = check  # in the ledger once the run is recorded (tasks/steps/refresh_steps.py `ingest`)
    if check.refused is None:
        return None
    return refuse_without_calls(run, fleet, args.paths, options, check.refused)


def _plan_ahead(fleet: IngestResult, args: argparse.Namespace, options: RefreshOptions,
                run_id: str) -> tuple[Any, Any]:
    """The run's plan from its working store (tasks/steps/refresh_steps.py `plan_ahead`) and what it tells."""
    from fleet_data.tasks.control.logtext import fields
    from fleet_data.tasks.outputs.preview import preview_of
    from fleet_data.tasks.run.context import current
    from fleet_data.tasks.steps.refresh_steps import plan_ahead

    ahead = plan_ahead(current(run_id), fleet, options)
    if ahead.recovered["journals"] and not args.json:
        print(f"landed what earlier runs paid for and never landed: {fields(ahead.recovered)}", file=sys.stderr)
    return ahead, preview_of(ahead.plan, ahead.counts, options.max_units)


def _answer_without_calls(fleet: IngestResult, args: argparse.Namespace, options: RefreshOptions,
                          run_id: str, ahead: Any) -> dict[str, Any]:
    from fleet_data.tasks.run.context import current
    from fleet_data.tasks.steps.refresh_steps import answer_without_calls

    return answer_without_calls(current(run_id), fleet, args.paths, options, ahead)


def prefect_api_answers() -> None:
    """Raise CommandError (exit 2) when PREFECT_API_URL names a server that gives no answer at all: said in one
    line, before anything is called or recorded, instead of Prefect's retries and a traceback. Any HTTP answer
    counts (Prefect Cloud asks for its key): only a server that is not there is refused."""
    from fleet_data.tasks.control import signals

    with signals.held():  # the command's first import of Prefect: its pydantic models, as in `load_flows`
        from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        return  # fleet starts Prefect's server itself
    import httpx

    from fleet_data.tasks.control.prefect_api import shown_url

    shown = shown_url(url)
    try:
        with httpx.Client(timeout=httpx.Timeout(10.0, connect=5.0)) as client:
            client.get(url.rstrip("/") + "/health")
    except httpx.HTTPError as exc:
        raise CommandError(f"the Prefect API at {shown} (PREFECT_API_URL) does not answer ({type(exc).__name__}): "
                           "start that server, or unset PREFECT_API_URL and fleet starts one of its own; "
                           "nothing was called") from None


def launch_prefect() -> None:
    """Start Prefect's server now, the shared one unless FLEET_PREFECT_SERVER=temporary (`start_prefect` then takes
    it): it takes some 3-10 s, mostly in its own process, while this one imports Prefect and checks the key."""
    from fleet_data.tasks.settings import process_settings

    settings = process_settings()
    if settings.prefect_server == "shared":
        from .shared_prefect import launch

        launch(settings.prefect_idle_seconds)
    else:
        from .processes import launch_prefect_server

        launch_prefect_server()


def abandon_prefect() -> None:
    """Stop the server `launch_prefect` started if this command never took it (it calls nothing after all)."""
    from fleet_data.tasks.settings import process_settings

    if process_settings().prefect_server == "shared":
        from .shared_prefect import abandon

        abandon()
    else:
        from .processes import abandon_launched_server

        abandon_launched_server()


def start_prefect(verbose: bool = False) -> None:
    """Start Prefect's temporary server (a child that dies with this command), or join the shared one
    (FLEET_PREFECT_SERVER=shared), and load the flows, saying so meanwhile."""
    from prefect.settings import PREFECT_API_URL

    from fleet_data.tasks.settings import process_settings

    from .processes import start_prefect_server
    from .quiet_faults import hide_fault_tracebacks
    from .shared_prefect import use_shared_server

    settings = process_settings()

    def start() -> None:
        if settings.prefect_server == "shared":  # one local server for many commands (flows/shared_prefect.py)
            use_shared_server(settings.prefect_idle_seconds, meanwhile=load_flows)  # loaded while one starts
        else:
            start_prefect_server(meanwhile=load_flows)  # loaded while the server starts

    hide_fault_tracebacks(verbose)  # -v shows every traceback
    if PREFECT_API_URL.value():  # a server of its own: nothing to start
        start()
        return
    if sys.stderr.isatty():
        from rich.console import Console

        with Console(stderr=True).status("starting Prefect…"):
            start()
    else:  # a log: a line every few seconds while it starts (under load it can take a minute)
        from fleet_data.tasks.control import progress

        with progress.still("starting Prefect"):
            start()


def load_flows() -> None:
    """Import the flows (Prefect's flow machinery, seconds more under load), a stop signal's `RunCancelled` deferred to
    the end: raised inside the import, pydantic, building a model's validator, made it a SchemaError of its own, which
    the command reported as a bug (the signal, sent as Prefect starts, lands while the flows load meanwhile)."""
    from fleet_data.tasks.control import collector, signals

    with signals.held():
        importlib.import_module("fleet_data.flows.refresh")
    collector.loaded()  # Prefect's flow machinery loaded: later collections need not walk it again


class SaidOnce:
    """A progress reporter that does not say again the plan the command printed before Prefect started."""

    def __init__(self, reporter: progress.Reporter, said: str):
        self._reporter, self._said = reporter, said
        self.start, self.advance, self.finish = reporter.start, reporter.advance, reporter.finish

    def say(self, text: str) -> None:
        if text != self._said:
            self._reporter.say(text)
