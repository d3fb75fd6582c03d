"""How `fleet COMMAND --help` reads: options in groups (what to fetch, cost, concurrency, output...), each with its
environment and `fleet.toml` names (flows/config.py writes those into the option's line), and examples.

The groups and the examples are declared here once; the reference pages (flows/cli/reference.py) show the same,
and tests/flows/test_cli_help.py parses every example, so an example that no longer parses fails the suite.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from fleet_data.tasks.exitcodes import MEANINGS

FETCH, COST, CONCURRENCY, OUTPUT = "what to fetch", "cost", "concurrency", "output"
NOTIFICATIONS, SCHEDULES = "recall batch notifications", "schedules"
ORDER = (FETCH, COST, CONCURRENCY, OUTPUT, NOTIFICATIONS, SCHEDULES)

# Every option's group, by its name (argparse's `dest`); the same name means the same in every command.
GROUPS: dict[str, str] = {
    # the options' model (tasks/settings.py): a new option is placed here (a test says so)
    "datasets": FETCH, "fresh": FETCH, "force": FETCH, "recall_details": FETCH, "plates": FETCH, "vin_column": FETCH,
    "max_units": COST, "dry_run": COST, "allow_clock_behind": COST,
    "concurrency": CONCURRENCY, "chunk_size": CONCURRENCY, "batch_size": CONCURRENCY, "retry_window": CONCURRENCY,
    "workers": CONCURRENCY, "dask": CONCURRENCY, "staging": CONCURRENCY,
    "db": OUTPUT, "lake": OUTPUT, "value_move": OUTPUT, "notify": OUTPUT,
    "webhook_url": NOTIFICATIONS, "webhook_listen": NOTIFICATIONS,
    # the commands' own flags
    "vins": FETCH, "vins_file": FETCH, "failures_of": FETCH, "failures": FETCH, "reparse": FETCH,
    "wait": CONCURRENCY,
    "json": OUTPUT, "runs": OUTPUT, "out": OUTPUT, "since": OUTPUT,
    "recalls_cron": SCHEDULES, "values_cron": SCHEDULES, "timezone": SCHEDULES, "name": SCHEDULES,
    "log_level": SCHEDULES,
}
# `fleet serve --datasets` picks the monthly deployment's datasets: a schedule's, not a run's.
COMMAND_GROUPS: dict[tuple[str, str], str] = {("serve", "datasets"): SCHEDULES}


@dataclass(frozen=True)
class Example:
    command: str  # as typed, after `fleet ` (run by tests/test_readme.py from the reference page when `why_not` is None)
    says: str
    why_not: str | None = None  # why the reference page does not run it


NOT_RUN_SERVER = "it serves until Ctrl-C"
EXAMPLES: dict[str, tuple[Example, ...]] = {
    "refresh": (
        Example("refresh data/sample_fleet.csv --dry-run", "what a refresh would call and cost now; writes nothing"),
        Example("refresh data/sample_fleet.csv --datasets recalls,specs --max-units 5000",
                "keep two datasets fresh; refused (exit code 4) if the plan costs more than 5,000 units"),
        Example("refresh data/sample_fleet.csv --fresh market_value=14d --json",
                "values older than 14 days are due; the summary as JSON"),
        Example("refresh data/sample_fleet.csv --workers 4 --concurrency 16",
                "fetch in 4 processes, 16 calls in flight each per dataset"),
        Example("refresh data/sample_fleet.csv --dask tcp://10.0.0.5:8786 --staging s3://bucket/fleet",
                "fetch on a Dask cluster, staging on S3 (the `dask` and `s3` extras)",
                "it needs a Dask cluster and object storage"),
    ),
    "backfill": (
        Example("backfill --failures", "fetch again every open failure, of every run"),
        Example("backfill --vins 1HGCM82633A004352 --datasets specs,history", "fetch two datasets again for one VIN"),
        Example("backfill --reparse --datasets specs", "rebuild the specs tables from the stored answers; no call"),
    ),
    "status": (
        Example("status", "the run in progress, the last runs, units this month, pending and failed VINs"),
        Example("status --runs 3 --json", "the same as JSON, the last 3 runs"),
    ),
    "report": (Example("report --out data/fleet.report.html", "the fleet report from the database alone"),),
    "serve": (
        Example("serve data/sample_fleet.csv --name nightly --timezone Europe/Paris",
                "the weekly recalls and monthly values deployments, served", NOT_RUN_SERVER),
    ),
    "lookup": (
        Example("lookup specs 1HGCM82633A004352", "one call to one endpoint, printed as a table"),
        Example('lookup year-make-model 2012 BMW "5 Series" --json', "or as the service's JSON (the key redacted)"),
    ),
    "sandbox": (
        Example("sandbox --port 8787 --fault-rate 0.1", "the emulator, one call in ten failing", NOT_RUN_SERVER),
    ),
    "completion": (
        Example("completion bash", "print the bash completion script"),
        Example("completion zsh --install", "install it for zsh, in your home folder", "it writes into your home folder"),
    ),
}


def arrange(parser: argparse.ArgumentParser, command: str, summary: str) -> None:
    """Lay out a command's help: its summary on top, the options in their groups, its examples below."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = parser.description or summary[0].upper() + summary[1:] + "."
    parser.epilog = epilog(command)
    options = parser._optionals
    for name in ORDER:
        moving = [a for a in options._group_actions if group_of(command, a) == name]
        if moving:
            group = parser.add_argument_group(name)
            for action in moving:
                options._group_actions.remove(action)
                group._group_actions.append(action)
            options.title = "other options"
    # argparse lists its groups in the order they were made: the named ones first, the rest (-h) last
    parser._action_groups.remove(options)
    parser._action_groups.append(options)


def group_of(command: str, action: argparse.Action) -> str | None:
    if not action.option_strings or action.help == argparse.SUPPRESS:
        return None
    return COMMAND_GROUPS.get((command, action.dest)) or GROUPS.get(action.dest)


def epilog(command: str) -> str:
    lines = ["examples:"]
    for example in EXAMPLES.get(command, ()):
        lines += [f"  fleet {example.command}", f"      {example.says}"]
    return "\n".join(lines)


TOP_EPILOG = "\n".join([
    "examples:",
    "  fleet refresh data/sample_fleet.csv --dry-run   what a refresh would call and cost; writes nothing",
    "  fleet refresh data/sample_fleet.csv             keep the fleet fresh: call only for what is stale",
    "  fleet status                                    the last runs, units spent, pending and failed VINs",
    "",
    "`fleet COMMAND --help` lists a command's options, each with its FLEET_* variable and fleet.toml key.",
    "",
    "exit codes:",
    *[f"  {code:>3}  {name}" for code, name, _ in MEANINGS],
])
