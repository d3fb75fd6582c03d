"""The `fleet` command: one-off lookups, the sandbox, and the pipeline's flows."""

from __future__ import annotations

import argparse
import atexit
import difflib
import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any, NoReturn

# No network here and no telemetry wanted anywhere Prefect runs.
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")

from .exitcodes import BUG, NO_MEMORY, NO_SPACE, STORE_LOST, USAGE

BROKEN_PIPE = 128 + signal.SIGPIPE  # 141: what a shell reports for a writer its reader left (`| head`)
RUNS = ("refresh", "backfill")  # the commands that hold a run, and end at once once it is stopped
AT_EXIT_SECONDS = 2.0  # what a stopped command gives threads still running and exit handlers, in all
CONFIGURED = ("refresh", "backfill", "status", "serve")  # the commands whose options flows/config.py fills in


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors as JSON when `--json` was asked for."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if _Parser.json_errors:
            _print_error(f"{self.prog}: {message}", USAGE, as_json=True)
            sys.exit(USAGE)
        super().error(message)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fleet-data")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    from . import commands, lookup

    parser = _Parser(prog="fleet", description="Fleet files in, fresh vehicle data out.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logs, HTTP requests included (keys redacted)")
    parser.add_argument("--version", action="version", version=f"fleet {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    lookup.add_parser(sub)
    commands.add_refresh(sub)
    from . import backfill, report, serve, status

    backfill.add_parser(sub)
    status.add_parser(sub)
    report.add_parser(sub)
    serve.add_parser(sub)
    sandbox = sub.add_parser("sandbox", help="run the local emulator of the Vehicle Data Service", add_help=False)
    sandbox.add_argument("sandbox_args", nargs=argparse.REMAINDER)
    sandbox.set_defaults(run=_run_sandbox)
    for name, command in sub.choices.items():
        if name != "sandbox":
            _accept_verbose(command)
    return parser


def _accept_verbose(parser: argparse.ArgumentParser) -> None:
    """`-v` after the command too (`fleet refresh -v ...`), in every subcommand, however deep."""
    # SUPPRESS: a subcommand that was not given -v leaves the top-level value alone.
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for inner in action.choices.values():
                _accept_verbose(inner)


def _leaf(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command parser the arguments ended in: its usage is the one to show."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and getattr(args, action.dest, None) in action.choices:
            return _leaf(action.choices[getattr(args, action.dest)], args)
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """Arguments, with every unset option filled from the environment, the project file or its default.

    Raises CommandError/ConfigError (exit code 2) for a value that cannot be used.
    """
    from . import checks, config

    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:  # argparse would print the top-level usage: show the subcommand's, with a suggestion
        leaf = _leaf(parser, args)
        options = [o for action in leaf._actions for o in action.option_strings if o.startswith("--")]
        hints = [difflib.get_close_matches(e.split("=", 1)[0], options, n=1) for e in extras if e.startswith("-")]
        hint = "; ".join(f"did you mean {h[0]}?" for h in hints if h)
        leaf.error(f"unrecognized arguments: {' '.join(extras)}" + (f"; {hint}" if hint else ""))
    if args.command in CONFIGURED:
        if getattr(args, "fresh", None):
            args.fresh = checks.fresh_flags(args.fresh)
        config.apply(args, args.command)
    return args


def _run_sandbox(args: argparse.Namespace) -> int:
    from fleet_data.connectors.sandbox.__main__ import main as sandbox_main

    return sandbox_main(args.sandbox_args) or 0


def _print_error(message: str, code: int, as_json: bool) -> int:
    """One line: `error: ...` on stderr, or with --json `{"error": {...}}` on stdout (where the summary goes)."""
    from .checks import KINDS

    if as_json:
        print(json.dumps({"error": {"code": code, "kind": KINDS.get(code, "error"), "message": message}}), flush=True)
    else:
        print(f"error: {message}", file=sys.stderr, flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    from fleet_data.tasks.control.memory import OutOfMemory, check_start, lean_when_limited

    lean_when_limited()  # before polars, Arrow or DuckDB load: under `ulimit -v` they must map only what they use
    if _command(arguments) not in (None, "sandbox"):
        try:
            check_start()  # an address-space limit too low to load them: one line, not a crash in an import
        except OutOfMemory as exc:
            return _print_error(exc.reason, NO_MEMORY, "--json" in arguments)
    try:
        code = _main(arguments)
        sys.stdout.flush()  # here, not at exit: a reader that left is noticed where it can be handled
        if argv is None and _command(arguments) in RUNS and _signalled():  # a run's own process, stopped by a signal
            _end_now(code)
        return code
    except BrokenPipeError:
        # `fleet status | head -1`: the reader has what it wanted. No traceback, and no second error when
        # Python flushes stdout on the way out.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE


def _command(arguments: list[str]) -> str | None:
    return next((a for a in arguments if not a.startswith("-")), None)


def _signalled() -> bool:
    """Whether a stop signal was handled in this process (no signal handler was set if its module never loaded)."""
    module = sys.modules.get("fleet_data.tasks.control.signals")
    return bool(module and module.signalled())


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
    command = next((a for a in arguments if not a.startswith("-")), None)
    if command == "sandbox":
        # The sandbox has its own options (--port, --fault-rate...): hand them over untouched.
        return _run_sandbox(argparse.Namespace(sandbox_args=arguments[arguments.index("sandbox") + 1:]))
    from fleet_data.tasks.control.faults import as_fault

    from .checks import usage_errors

    as_json = "--json" in arguments
    _Parser.json_errors = as_json
    try:
        args = parse(arguments)
    except usage_errors() as exc:
        return _print_error(str(exc), USAGE, as_json)
    finally:
        _Parser.json_errors = False
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
    except usage_errors() as exc:
        return _print_error(str(exc), getattr(exc, "code", USAGE), as_json)
    except (KeyboardInterrupt, SystemExit, BrokenPipeError):
        raise
    except BaseException as exc:  # BaseException: a polars/pyo3 PanicException is not an Exception
        machine = machine_fault(exc)  # a full disk, the store or lock gone: exit 6 or 7
        if machine is not None:
            _let_go(exc)
            return _print_error(machine[1], machine[0], as_json)
        fault = as_fault(exc)  # a path or file the user must fix (tasks/control/faults.py), not a bug
        if fault is not None:
            logging.getLogger("fleet").debug("the environment stopped %s", args.command, exc_info=exc)  # -v: where
            _let_go(exc)
            return _print_error(str(fault), USAGE, as_json)
        if args.verbose:
            raise  # -v: the full traceback, for a bug report
        text = " ".join(str(exc).split())
        text = text if len(text) <= 300 else text[:299] + "…"
        return _print_error(f"{args.command} stopped on an unexpected {type(exc).__name__}: {text or 'no message'} "
                            "(this is a bug, not your input's fault; run again with -v to see the traceback)",
                            BUG, as_json)


def _let_go(exc: BaseException | None) -> None:
    """Free what the failed code's frames held (a DuckDB relation kept alive to the end makes DuckDB's
    bindings print dozens of "leaked" lines at exit); Prefect keeps the exception in its states."""
    import traceback

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__


def machine_fault(exc: BaseException) -> tuple[int, str] | None:
    """A fault of the machine, not a bug: (exit code, one line) for a full disk, a store or lock gone, or an
    allocation refused; else None."""
    from fleet_data.tasks.control import memory
    from fleet_data.tasks.control.resources import STORE_LOST as LOST, ResourceLost, full_disk_error

    if isinstance(exc, ResourceLost):
        return (STORE_LOST if exc.kind == LOST else NO_SPACE), exc.reason
    if (allocation := memory.refused(exc)) is not None:  # an OutOfMemory, or an allocation refused anywhere
        return NO_MEMORY, memory.out_of_memory_line(allocation)
    refused = full_disk_error(exc)
    if refused is None:
        return None
    text = " ".join(str(refused).split())
    return NO_SPACE, f"disk full: {text[:240]}; free some space and run again: nothing paid is bought twice"


def _pipes_end_quietly() -> None:
    """rich, on a broken pipe, exits with code 1 (a bug, in our table): let it raise, so `main` handles it."""
    from rich.console import Console

    def broken_pipe(self: Any) -> None:
        self.quiet = True
        raise BrokenPipeError

    Console.on_broken_pipe = broken_pipe  # type: ignore[method-assign]


if __name__ == "__main__":
    sys.exit(main())
