"""The `fleet` command: one-off lookups, the sandbox, and the pipeline's flows."""

from __future__ import annotations

import argparse
import logging
import os
import sys

# No network here and no telemetry wanted anywhere Prefect runs.
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")


def build_parser() -> argparse.ArgumentParser:
    from . import commands, lookup

    parser = argparse.ArgumentParser(prog="fleet", description="Fleet files in, fresh vehicle data out.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logs, HTTP requests included (keys redacted)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    lookup.add_parser(sub)
    commands.add_refresh(sub)
    from . import backfill, serve, status

    backfill.add_parser(sub)
    status.add_parser(sub)
    serve.add_parser(sub)
    sandbox = sub.add_parser("sandbox", help="run the local emulator of the Vehicle Data Service", add_help=False)
    sandbox.add_argument("sandbox_args", nargs=argparse.REMAINDER)
    sandbox.set_defaults(run=_run_sandbox)
    return parser


def _run_sandbox(args: argparse.Namespace) -> int:
    from connectors.sandbox.__main__ import main as sandbox_main

    return sandbox_main(args.sandbox_args) or 0


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if not {"-v", "--verbose"} & set(arguments):
        # Prefect reads its logging setup when first imported, which building the parser may do: decide
        # first. Its INFO lines would drown the progress bars, so the terminal gets warnings only, while
        # the flow run's INFO logs still reach the Prefect server; -v shows them (and HTTP requests) here.
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    command = next((a for a in arguments if not a.startswith("-")), None)
    if command == "sandbox":
        # The sandbox has its own options (--port, --fault-rate...): hand them over untouched.
        return _run_sandbox(argparse.Namespace(sandbox_args=arguments[arguments.index("sandbox") + 1:]))
    args = build_parser().parse_args(argv)
    terminal = logging.StreamHandler(sys.stderr)
    terminal.setLevel(logging.DEBUG if args.verbose else logging.WARNING)  # Prefect's INFO goes to its server only
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=[terminal],
    )
    try:
        return args.run(args)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # BaseException: a polars/pyo3 PanicException is not an Exception
        if args.verbose:
            raise  # -v: the full traceback, for a bug report
        text = " ".join(str(exc).split())
        text = text if len(text) <= 300 else text[:299] + "…"
        print(f"error: {args.command} stopped on an unexpected {type(exc).__name__}: {text or 'no message'} "
              "(this is a bug, not your input's fault; run again with -v to see the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
