"""`fleet serve`: the refresh flow as scheduled Prefect deployments, served from this process.

Two deployments of `refresh_fleet` over the same fleet file and database (the schedules and datasets
`prefect.yaml` gives its two for a work pool):
- `served-weekly-recalls`: recalls only, every Monday 06:00 UTC by default;
- `served-monthly-values`: specs, market values, history and lien/theft on the 1st at 06:00 UTC.
  Specs are fresh for a year, so monthly they cost only for VINs new to the fleet.
Freshness still applies inside each run: a schedule never pays twice for a fresh answer.
The runner takes one flow run at a time (`limit=1`): DuckDB allows one writer, and both
schedules fall on the same hour when the 1st is a Monday.

Their names are not `prefect.yaml`'s (`weekly-recalls`, `monthly-values`): a deployment is found by
name, so serving the same names would rewrite the worker's deployments (their pull step gone, the
work pool kept: the worker's runs then crashed looking for code at `path` None). `--name` changes the
prefix, for a second `fleet serve` of another fleet on the same server. The entrypoint is the module
(`fleet_data.flows.refresh.refresh_fleet`), as in `prefect.yaml`: no checkout path in either.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from fleet_data.tasks.datasets import LiveNames, scheduled
from fleet_data.tasks.plan.due import ALL_DATASETS
from .config import add_flags
from .defaults import DEFAULT_DB, DEFAULT_LAKE

RECALLS_CRON = "0 6 * * 1"
VALUES_CRON = "0 6 1 * *"
# The datasets each deployment refreshes: the declarations' `schedule` (tasks/datasets.py).
RECALL_DATASETS = LiveNames(lambda: scheduled("weekly"))
VALUE_DATASETS = LiveNames(lambda: scheduled("monthly"))
TIMEZONE = "UTC"
SERVED_NAME = "served"  # the prefix of the served deployments' names


def build_deployments(
    fleet_file: str,
    db: str = DEFAULT_DB,
    lake: str | None = DEFAULT_LAKE,
    *,
    recalls_cron: str = RECALLS_CRON,
    values_cron: str = VALUES_CRON,
    value_datasets: list[str] | None = None,
    timezone: str = TIMEZONE,
    name: str = SERVED_NAME,
) -> list[Any]:
    """The two `RunnerDeployment`s; paths are made absolute so a run does not depend on the working directory."""
    from prefect.schedules import Cron
    from prefect.types.entrypoint import EntrypointType

    from .refresh import refresh_fleet

    value_datasets = list(value_datasets or VALUE_DATASETS)
    unknown = [d for d in value_datasets if d not in ALL_DATASETS]
    if unknown:
        raise ValueError(f"unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(ALL_DATASETS)}")
    paths = [str(Path(fleet_file).resolve())]
    where = {"db": str(Path(db).resolve()), "lake": str(Path(lake).resolve()) if lake else None}
    plans = [
        ("weekly-recalls", recalls_cron, list(RECALL_DATASETS), "Re-check the fleet's recalls (one batch per 10,000 VINs)."),
        ("monthly-values", values_cron, value_datasets, "Refresh values, history and lien/theft; decode new VINs."),
    ]
    return [
        refresh_fleet.to_deployment(
            name=f"{name}-{plan}", schedule=Cron(cron, timezone=timezone), entrypoint_type=EntrypointType.MODULE_PATH,
            # The flow's `options` (tasks/settings.py), checked by the model here as Prefect will at each run.
            parameters={"paths": paths, "options": deployment_options(
                **where, datasets=list(datasets), fresh=scheduled_freshness(cron, timezone, datasets))},
            description=description, tags=["fleet"],
        )
        for plan, cron, datasets, description in plans
    ]


def deployment_options(**options: Any) -> dict[str, Any]:
    """A deployment's `options` parameter: what it sets, checked by the model (JSON, as Prefect stores it)."""
    from fleet_data.tasks.settings import RefreshOptions

    return RefreshOptions.model_validate(options).model_dump(mode="json", include=set(options))


def scheduled_freshness(cron: str, timezone: str, datasets: list[str]) -> dict[str, str]:
    """Freshness windows a little shorter than the schedule's shortest gap.

    With a 7-day window and a weekly run, last week's answers (stamped a few seconds after last
    week's tick) are a few seconds short of 7 days old at this week's tick: still fresh, so every
    other run would skip them; a 30-day window skips February's. 90% of the gap leaves room for a
    run's own length. Specs keep their year: a decode does not change.
    """
    import asyncio

    from prefect.server.schemas.schedules import CronSchedule

    from fleet_data.tasks.plan.due import DEFAULT_FRESHNESS

    fire_times = asyncio.run(CronSchedule(cron=cron, timezone=timezone).get_dates(n=13))
    gap = min(b - a for a, b in zip(fire_times, fire_times[1:]))
    hours = max(1, int(gap.total_seconds() * 0.9 // 3600))
    return {
        d: f"{hours}h" for d in datasets
        if d != "specs" and DEFAULT_FRESHNESS[d].total_seconds() > hours * 3600
    }


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the scheduled refresh deployments (weekly recalls, monthly values)")
    p.add_argument("fleet_file", metavar="FLEET_FILE", help="the fleet file (CSV/Parquet) each scheduled run reads")
    add_flags(p, "serve")  # --db and --lake, from the model (tasks/settings.py)
    p.add_argument("--recalls-cron", default=RECALLS_CRON, help=f"recalls schedule (default '{RECALLS_CRON}')")
    p.add_argument("--values-cron", default=VALUES_CRON, help=f"values schedule (default '{VALUES_CRON}')")
    p.add_argument("--datasets", default=",".join(VALUE_DATASETS),
                   help=f"datasets of the monthly deployment (default: {','.join(VALUE_DATASETS)})")
    p.add_argument("--timezone", default=TIMEZONE, help="time zone of both schedules (default UTC)")
    p.add_argument("--name", default=SERVED_NAME, type=_deployment_prefix,
                   help=f"prefix of the deployments' names: NAME-weekly-recalls, NAME-monthly-values (default "
                        f"{SERVED_NAME}; prefect.yaml's own are weekly-recalls and monthly-values)")
    p.add_argument("--log-level", default="INFO", help="level of the flow runs' Prefect logs (default INFO)")
    p.set_defaults(run=run_serve)


def _deployment_prefix(text: str) -> str:
    if not text or not all(c.isalnum() or c in "-_" for c in text):
        raise argparse.ArgumentTypeError(f"{text!r}: letters, digits, '-' and '_' only")
    return text


def run_serve(args: argparse.Namespace) -> int:
    import os

    # Scheduled runs have no terminal to draw progress bars on: their Prefect logs are the record, on the
    # server and here. Prefect reads its settings on import, so this comes first (the served runs inherit it).
    level = args.log_level.upper()
    os.environ["PREFECT_LOGGING_LEVEL"] = level
    os.environ["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] = level
    for handler in logging.getLogger().handlers:  # `fleet` keeps its terminal to warnings otherwise
        handler.setLevel(level)
    from .checks import CommandError, check_serve

    try:
        check_serve(args)  # the fleet file, the paths, the service's settings: before Prefect is imported
    except CommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    try:
        deployments = build_deployments(args.fleet_file, args.db, args.lake or None, recalls_cron=args.recalls_cron,
                                        values_cron=args.values_cron, value_datasets=datasets, timezone=args.timezone,
                                        name=args.name)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from prefect.settings import get_current_settings

    if not get_current_settings().api.url:
        # A temporary server lives only as long as one flow run; schedules need one that stays up.
        print("error: serving schedules needs a Prefect server that stays up: run `prefect server start` and set "
              "PREFECT_API_URL (e.g. http://127.0.0.1:4200/api), or use Prefect Cloud", file=sys.stderr)
        return 2
    try:
        key_in_block = _key_source()
        _not_a_work_pool_deployment(deployments)
    except CommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    from .refresh import refresh_fleet
    from .serving import serve_until_stopped
    from .target import service_settings

    # Flow runs inherit this process's environment: the key (or the embedded sandbox's URL) travels there,
    # never as a deployment parameter. A key in the Secret block is read by each run (flows/apikey.py).
    if key_in_block:
        return serve_until_stopped(deployments, refresh_fleet)
    with service_settings():
        return serve_until_stopped(deployments, refresh_fleet)


def _key_source() -> bool:
    """Where the runs find the key, as a worker's do: True for the Secret block, False for the environment.

    No key in the environment: the Prefect Secret block `vds-api-key` (with or without VDS_BASE_URL, as on
    a worker); with neither a key nor VDS_BASE_URL, the embedded sandbox (False). VDS_BASE_URL with no key
    anywhere is refused: every scheduled run would be refused by the service.
    """
    from fleet_data.tasks.settings import client_settings

    from .apikey import SECRET_BLOCK, secret_block_key
    from .checks import CommandError

    settings = client_settings()
    if settings.api_key:
        return False
    if secret_block_key() is not None:
        return True
    if settings.base_url:
        raise CommandError(f"VDS_BASE_URL is set but there is no key: set VDS_API_KEY in the environment or .env, or "
                           f"save it in a Prefect Secret block named {SECRET_BLOCK!r} (or unset VDS_BASE_URL to use "
                           "the embedded sandbox)")
    return False


def _not_a_work_pool_deployment(deployments: list[Any]) -> None:
    """Refuse to take over a deployment of the same name that runs on a work pool (`prefect deploy`'s)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    from .checks import CommandError

    with get_client(sync_client=True) as client:
        for deployment in deployments:
            full_name = f"{deployment.flow_name}/{deployment.name}"
            try:
                existing = client.read_deployment_by_name(full_name)
            except ObjectNotFound:
                continue
            if existing.work_pool_name:
                raise CommandError(f"deployment {full_name} runs on work pool {existing.work_pool_name!r} "
                                   "(prefect deploy): serving it here would take it from its worker; choose "
                                   "another prefix with --name")
