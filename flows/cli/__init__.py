"""The `fleet` command: one-off lookups, the sandbox, and the pipeline's flows.

This module runs a command; flows/cli/errors.py turns how it ended into one line and an exit code;
the parser is flows/cli/parser.py, the help's layout flows/cli/helptext.py, shell completion
flows/cli/completion.py, the systems it runs on flows/cli/system.py, the docs' reference pages
flows/cli/reference.py.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import sys
import threading
import time
from typing import Any, NoReturn

# No network here and no telemetry wanted anywhere Prefect runs.
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")

from fleet_data.tasks.errors import UsageError
from fleet_data.tasks.exitcodes import BROKEN_PIPE, BUG, USAGE

from .errors import bug, ended, machine_fault, print_error
from .parser import CONFIGURED, build_parser, command_of, parse, run_sandbox
from .system import unsupported_system

__all__ = ["CONFIGURED", "build_parser", "machine_fault", "main", "parse"]

RUNS = ("refresh", "backfill")  # the commands that hold a run, and end at once once it is stopped
AT_EXIT_SECONDS = 2.0  # what a stopped command gives threads still running and exit handlers, in all


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    from fleet_data.tasks.control import collector
    from fleet_data.tasks.control.memory import OutOfMemory, check_start, lean_when_limited

    collector.loading()  # the command's code loads with few collections (until `collector.loaded`)

    lean_when_limited()  # before polars, Arrow or DuckDB load: under `ulimit -v` they must map only what they use
    if command_of(arguments) not in (None, "sandbox"):
        try:
            check_start()  # an address-space limit too low to load them: one line, not a crash in an import
        except OutOfMemory as exc:
            return print_error(exc.reason, exc.code, "--json" in arguments)
    try:
        code = _main(arguments)
        sys.stdout.flush()  # here, not at exit: a reader that left is noticed where it can be handled
        # A run's own process, stopped by a signal, or whose Prefect API was lost (its exit would retry what Prefect
        # still has to send, for minutes: tasks/control/prefect_api.py).
        if argv is None and command_of(arguments) in RUNS and (_signalled() or _prefect_lost()):
            _end_now(code)
        return code
    except BrokenPipeError:
        # `fleet status | head -1`: the reader has what it wanted. No traceback, and no second error when
        # Python flushes stdout on the way out.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE


def _signalled() -> bool:
    """Whether a stop signal was handled in this process (no signal handler was set if its module never loaded)."""
    module = sys.modules.get("fleet_data.tasks.control.signals")
    return bool(module and module.signalled())


def _prefect_lost() -> bool:
    module = sys.modules.get("fleet_data.tasks.control.quiet")
    return bool(module and module.is_prefect_lost())


def _end_now(code: int) -> NoReturn:
    """End a stopped command at once, its run recorded and published (docs/stopping.md).

    Python's own exit would wait for Prefect to ship its logs (up to 5 s), then collect every object
    Prefect made (5 s more on a loaded machine), after a SIGTERM that must end the command within 10.
    So threads still running and the exit handlers (Prefect's log shipping, its temporary server's stop)
    get `AT_EXIT_SECONDS` in all, and the process ends; the temporary server dies with it anyway
    (flows/processes.py).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    finishing = threading.Thread(target=_finish_threads_and_exit_handlers, name="at-exit", daemon=True)
    finishing.start()
    finishing.join(AT_EXIT_SECONDS)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _finish_threads_and_exit_handlers() -> None:
    deadline = time.monotonic() + AT_EXIT_SECONDS
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon and thread is not threading.main_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
    atexit._run_exitfuncs()


def _main(arguments: list[str]) -> int:
    if not {"-v", "--verbose"} & set(arguments):
        # Prefect reads its logging setup when first imported, which building the parser may do: decide
        # first. Its INFO lines would drown the progress bars, so the terminal gets warnings only, while
        # the flow run's INFO logs still reach the Prefect server; -v shows them (and HTTP requests) here.
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    command = command_of(arguments)
    as_json = "--json" in arguments
    refused = unsupported_system()
    if refused and command is not None:  # --help and --version still answer
        return print_error(refused, USAGE, as_json)
    if command == "sandbox":
        # The sandbox has its own options (--port, --fault-rate...): hand them over untouched.
        return run_sandbox(argparse.Namespace(sandbox_args=arguments[arguments.index("sandbox") + 1:]))
    args = _parse_or_refuse(arguments, as_json)
    if isinstance(args, int):
        return args
    return _run(args)


def _parse_or_refuse(arguments: list[str], as_json: bool) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code of a usage error, said in one line (JSON with --json)."""
    from .parser import _Parser

    _Parser.json_errors = as_json
    try:
        return parse(arguments)
    except SystemExit:  # --help, --version, argparse's own usage errors: first, so nothing more is imported for them
        raise
    except UsageError as exc:
        return print_error(str(exc), exc.code, as_json)
    finally:
        _Parser.json_errors = False


def _run(args: argparse.Namespace) -> int:
    as_json = bool(getattr(args, "json", False))
    terminal = logging.StreamHandler(sys.stderr)
    terminal.setLevel(logging.DEBUG if args.verbose else logging.WARNING)  # Prefect's INFO goes to its server only
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=[terminal],
    )
    _pipes_end_quietly()
    try:
        return int(args.run(args))
    except (KeyboardInterrupt, SystemExit, BrokenPipeError):
        raise
    except BaseException as exc:  # BaseException: a polars/pyo3 PanicException is not an Exception
        known = ended(exc, args.command)  # ours by its code, the machine's or the environment's translated
        if known is None and args.verbose:
            raise  # -v: the full traceback, for a bug report
        code, line = known or (BUG, bug(exc, args.command))
        _let_go(exc)
        return print_error(line, code, as_json)


def _let_go(exc: BaseException | None) -> None:
    """Free what the failed code's frames held (a DuckDB relation kept alive to the end makes DuckDB's
    bindings print dozens of "leaked" lines at exit); Prefect keeps the exception in its states."""
    import traceback

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__


def _pipes_end_quietly() -> None:
    """rich, on a broken pipe, exits with code 1 (a bug, in our table): let it raise, so `main` handles it."""
    from rich.console import Console

    def broken_pipe(self: Any) -> None:
        self.quiet = True
        raise BrokenPipeError

    Console.on_broken_pipe = broken_pipe  # type: ignore[method-assign]
