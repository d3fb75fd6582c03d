"""The command line's parser: the commands in one table, each command's parser built only when it is used.

`fleet --help` lists the commands from `COMMANDS` alone and imports none of them (the models, polars,
DuckDB and httpx stay unloaded: tests/bench/test_cli_bench.py measures it); `fleet refresh ...` builds the
refresh parser only. `build_parser()` with no argument builds every command, for the reference pages
(flows/cli/reference.py), shell completion (flows/cli/completion.py) and the tests.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from dataclasses import dataclass
from typing import NoReturn

from fleet_data.tasks.exitcodes import USAGE
from . import helptext

CONFIGURED = ("refresh", "backfill", "status", "serve")  # the commands whose options flows/config.py fills in
EVERY = "*"  # build_parser's default: every command's full parser


@dataclass(frozen=True)
class Command:
    name: str
    summary: str  # the line `fleet --help` shows; the command's own parser says the same (tests/flows/test_cli_help.py)
    adder: str  # "module:function" (in fleet_data.flows) that adds the command's full parser to the subparsers


COMMANDS = (
    Command("refresh", "turn fleet files into fresh analyst tables", "commands:add_refresh"),
    Command("backfill", "fetch chosen datasets again for chosen VINs or failures; or re-parse", "backfill:add_parser"),
    Command("status", "last runs, units spent this month, pending and failed VINs, batches in flight", "status:add_parser"),
    Command("report", "the fleet at a glance as one HTML file that opens offline (safety first, what changed, values, "
                      "recalls, title brands, freshness, units)", "report:add_parser"),
    Command("serve", "serve the scheduled refresh deployments (weekly recalls, monthly values)", "serve:add_parser"),
    Command("lookup", "one call to any endpoint of the service", "lookup:add_parser"),
    Command("sandbox", "run the local emulator of the Vehicle Data Service", "cli.parser:add_sandbox"),
    Command("completion", "print or install the shell completion script (bash, zsh, fish)", "cli.completion:add_parser"),
)
NAMES = tuple(c.name for c in COMMANDS)


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors as JSON when `--json` was asked for."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if _Parser.json_errors:
            from .errors import print_error

            print_error(f"{self.prog}: {message}", USAGE, as_json=True)
            sys.exit(USAGE)
        super().error(message)


def version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fleet-data")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def build_parser(only: str | None = EVERY) -> argparse.ArgumentParser:
    """`fleet`'s parser: every command in full (the default), or only `only` in full and the others as a name and
    a summary (None: all as summaries, enough for `fleet --help`)."""
    parser = _Parser(prog="fleet", description="Fleet files in, fresh vehicle data out.",
                     epilog=helptext.TOP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logs, HTTP requests included (keys redacted)")
    parser.add_argument("--version", action="version", version=f"fleet {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        if only in (EVERY, command.name):
            module, function = command.adder.split(":")
            getattr(importlib.import_module(f"fleet_data.flows.{module}"), function)(sub)
            built = sub.choices[command.name]
            helptext.arrange(built, command.name, command.summary)
            if command.name != "sandbox":
                _accept_verbose(built)
        else:
            sub.add_parser(command.name, help=command.summary, add_help=False)
    return parser


def add_sandbox(sub: argparse._SubParsersAction) -> None:
    """`fleet sandbox`: its options are the sandbox's own (connectors/sandbox/__main__.py), handed over untouched."""
    sandbox = sub.add_parser("sandbox", help=COMMANDS[NAMES.index("sandbox")].summary, add_help=False)
    sandbox.add_argument("sandbox_args", nargs=argparse.REMAINDER)
    sandbox.set_defaults(run=run_sandbox)


def run_sandbox(args: argparse.Namespace) -> int:
    from fleet_data.connectors.sandbox.__main__ import build_parser as sandbox_parser, main as sandbox_main

    if {"-h", "--help"} & set(args.sandbox_args):  # the sandbox's own options, with fleet's examples below them
        own = sandbox_parser()
        own.formatter_class, own.epilog = argparse.RawDescriptionHelpFormatter, helptext.epilog("sandbox")
        own.print_help()
        own.exit()  # as every other command's --help: SystemExit(0)
    return sandbox_main(args.sandbox_args) or 0


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


def command_of(arguments: list[str]) -> str | None:
    """The command the arguments name: the first word that is not an option (no top-level option takes a value)."""
    return next((a for a in arguments if not a.startswith("-")), None)


def parse(argv: list[str]) -> argparse.Namespace:
    """Arguments, with every unset option filled from the environment, the project file or its default.

    Raises CommandError/ConfigError (exit code 2) for a value that cannot be used.
    """
    named = command_of(argv)
    parser = build_parser(named if named in NAMES else None)
    args, extras = parser.parse_known_args(argv)
    from .. import checks, config  # not before: `fleet --help` never needs the options' models
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
