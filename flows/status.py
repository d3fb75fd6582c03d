"""`fleet status`: where the pipeline stands, read from the published database alone.

Last runs, units spent per endpoint this calendar month (UTC) as known plus possible (calls never answered,
which the service may have billed: docs/ledger.md), damaged answer journals kept in quarantine, per dataset how
many roster VINs are in each status of the view vin_status (answered, no data, not applicable, pending, failed,
never asked), what is pending and why, the open failures, and recall batches still in flight;
and the run in flight, if any, from the progress file it keeps beside the database.
It calls no service and starts no Prefect. It opens the published snapshot read-only,
never the working store, and writes nothing: a run still `running` in the snapshot whose
process is gone is shown `interrupted` (the next run records it so when it takes the lock).
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fleet_data.tasks.plan.due import DEFAULT_DATASETS
from .config import add_flags

BATCH_COLUMNS = ("batch_id", "status", "submitted_at", "total_vins", "processed_vins", "vins_count", "run_id", "fetched_at")
FAILED_GROUPS = 20  # kinds of failure listed; the view vin_status has every one


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="last runs, units spent this month, pending and failed VINs, batches in flight")
    add_flags(p, "status")  # --db, from the model (tasks/settings.py)
    p.add_argument("--runs", type=int, default=10, help="how many recent runs to show")
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.set_defaults(run=run_status)


def month_start(now: datetime | None = None) -> datetime:
    now = now or datetime.now(timezone.utc)
    return now.astimezone(timezone.utc).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def fleet_status(db_path: str, runs: int = 10, now: datetime | None = None) -> dict[str, Any]:
    """The status as plain values (what `--json` prints)."""
    from fleet_data.tasks.run.progressfile import live_run
    from fleet_data.tasks.staging.area import StagingArea
    from fleet_data.tasks.store.database import DatabaseError
    from fleet_data.tasks.store.published import open_published

    from fleet_data.tasks.settings import CLOCK_TOLERANCE

    now = now or datetime.now(timezone.utc)
    since = month_start(now)
    # Looked at before and after reading the snapshot: a run that ends (or starts) meanwhile is
    # still recognised as the live one rather than shown interrupted.
    before = live_run(db_path)
    with open_published(db_path) as db:
        if not db.query("has_vin_status").item(0, 0):
            raise DatabaseError(f"{db_path}: written by an earlier version of fleet-data; any `fleet refresh` "
                                "brings it up to date (one with nothing due calls nothing)")
        recent = db.query("status_recent_runs", limit=runs).to_dicts()
        spent = db.query("units_by_endpoint_since", since=since, now=now).to_dicts()  # whatever the runs' clocks said
        services = db.query("status_services", future_after=now + CLOCK_TOLERANCE).to_dicts()
        clock_behind = db.query("status_clock_behind_runs",
                                tolerance_seconds=int(CLOCK_TOLERANCE.total_seconds())).to_dicts()
        datasets, pending, failed = vin_states(db.query("status_vin_groups"))
        batches = db.query("unfinished_recall_batches").select(BATCH_COLUMNS).to_dicts()
    after = live_run(db_path)
    live = {r["run_id"] for r in (before, after) if r}
    for run in recent:
        if run["status"] == "running" and run["run_id"] not in live:
            run["status"] = "interrupted"  # computed, not written: its process is gone
            run["message"] = run["message"] or "the process stopped before the run finished"
    return {
        "database": str(db_path),
        "live_run": after or before,
        "runs": recent,
        "month": f"{since:%Y-%m}",
        "units_this_month": spent,
        "units_this_month_total": sum(r["units"] for r in spent),
        "possible_units_this_month_total": sum(r["possible_units"] for r in spent),
        "calls_this_month_total": sum(r["calls"] for r in spent),
        "quarantined_journals": [str(p) for p in StagingArea.beside(db_path, "").quarantined()],
        "datasets": datasets,
        "pending": pending,
        "failed": failed,
        "recall_batches_in_flight": batches,
        "services": services,  # where the roster's current answers came from (NULL: before services were recorded)
        "runs_with_clock_behind": clock_behind,
    }


STATES = ("answered", "no_data", "not_applicable", "pending", "failed", "never_asked")


def vin_states(groups: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The view vin_status read once (`status_vin_groups`), three ways: per dataset the VINs in each state (every
    default dataset, and any other with a VIN asked for); what is pending, by why and since which run; the
    failures by dataset, status, whether worth retrying and message (the largest FAILED_GROUPS)."""
    import polars as pl

    from fleet_data.tasks.datasets import REGISTRY

    order = [n for name in REGISTRY for n in ((name, "recall_details") if name == "recalls" else (name,))]
    per = groups.group_by("dataset").agg(
        pl.col("vins").sum(), *(pl.col("vins").filter(pl.col("status") == s).sum().alias(s) for s in STATES),
        pl.col("vins").filter((pl.col("status") == "failed") & pl.col("retryable")).sum().alias("failed_retryable"),
        pl.col("last_answered").max().alias("last_fetched_at"))
    per = per.filter(pl.col("dataset").is_in(list(DEFAULT_DATASETS)) | (pl.col("never_asked") < pl.col("vins")))
    datasets = sorted(per.to_dicts(), key=lambda r: order.index(r["dataset"]) if r["dataset"] in order else len(order))
    pending = (groups.filter(pl.col("status") == "pending").group_by("dataset", "reason", "since_run_id")
               .agg(pl.col("vins").sum(), pl.col("first_since").min()).sort("first_since", "reason", nulls_last=True))
    failed = (groups.filter(pl.col("status") == "failed").group_by("dataset", "http_status", "retryable", "reason")
              .agg(pl.col("vins").sum(), pl.col("most_attempts").max()).rename({"reason": "message"})
              .sort(["vins", "dataset"], descending=[True, False]).head(FAILED_GROUPS))
    return datasets, sorted(pending.to_dicts(), key=lambda r: order.index(r["dataset"]) if r["dataset"] in order
                            else len(order)), failed.to_dicts()


def run_status(args: argparse.Namespace) -> int:
    from fleet_data.tasks.store.database import DatabaseError

    from .checks import CommandError, check_status

    check_status(args)
    if not Path(args.db).is_file():  # only the published file: the working store is the runs' own
        raise CommandError(f"{args.db}: no such database (run `fleet refresh` first, or pass --db)")
    try:
        status = fleet_status(args.db, args.runs)
    except DatabaseError as exc:
        raise CommandError(str(exc)) from None
    if args.json:
        print(json.dumps(status, indent=2, default=str))
    else:
        print_status(status)
    return 0


def print_status(status: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if Console().is_terminal else 140)

    def table(title: str, headers: list[str], rows: list[list[Any]], empty: str) -> None:
        if not rows:
            console.print(f"[bold]{title}[/bold]: {empty}")
            return
        t = Table(title=title, title_justify="left")
        for i, h in enumerate(headers):
            t.add_column(h, justify="left" if i == 0 else "right")
        for r in rows:
            t.add_row(*["" if v is None else _text(v) for v in r])
        console.print(t)

    live = status["live_run"]
    if live:
        counts = ", ".join(f"{key} {d['done']}/{d['total']}" for key, d in live["datasets"].items())
        console.print(f"[bold]Running now[/bold]: run {live['run_id']} ({live['command']}, pid {live['pid']}) since "
                      f"{live['started']}: {live['phase']}{'; ' + counts if counts else ''}; last published "
                      f"{live['last_publish'] or 'not yet in this run'}", highlight=False)
    else:
        console.print("[bold]Running now[/bold]: nothing", highlight=False)
    print_services(console, status)
    # units = known + possible: a call never answered (killed in flight, timed out) counts what it may have cost.
    table(f"Last runs ({status['database']})",
          ["run", "kind", "status", "service", "started", "took", "VINs", "rejected", "calls", "units", "of which possible"],
          [[r["run_id"], r["kind"], r["status"], r["service"], r["started_at"], _took(r), r["valid"], r["rejected"],
            r["calls"], r["units"], r["possible_units"]] for r in status["runs"]], "no runs yet")
    total, possible = status["units_this_month_total"], status["possible_units_this_month_total"]
    table(f"Units spent in {status['month']} (UTC): {total - possible} known + {possible} possible = {total} units, "
          f"{status['calls_this_month_total']} calls",
          ["endpoint", "calls", "failed calls", "no data (404)", "units", "of which possible"],
          [[r["endpoint"], r["calls"], r["failed_calls"], r["no_data_calls"], r["units"], r["possible_units"]]
           for r in status["units_this_month"]], "no calls this month")
    if status["quarantined_journals"]:
        console.print(f"[bold yellow]Damaged answer journals in quarantine[/bold yellow]: "
                      f"{len(status['quarantined_journals'])} (their readable answers landed; each beside a "
                      f"`.reason.txt`): {', '.join(status['quarantined_journals'])}", highlight=False, soft_wrap=True)
    # Not applicable: registered outside the dataset's markets, never called. Pending and retryable failures: the
    # next refresh asks again. recall_details: the VINs whose recall check counted recalls.
    table("VINs per dataset and state (view vin_status; the next refresh asks again for pending and retryable)",
          ["dataset", "VINs", "answered", "no data", "not applicable", "pending", "failed", "of which retryable",
           "never asked", "last answer"],
          [[r["dataset"], r["vins"], r["answered"], r["no_data"], r["not_applicable"], r["pending"], r["failed"],
            r["failed_retryable"], r["never_asked"], r["last_fetched_at"]] for r in status["datasets"]], "no roster yet")
    table("Pending (SELECT * FROM vin_status WHERE status = 'pending')", ["dataset", "VINs", "why", "since run", "since"],
          [[r["dataset"], r["vins"], r["reason"], r["since_run_id"], r["first_since"]] for r in status["pending"]], "none")
    table(f"Failed (the {FAILED_GROUPS} largest groups; SELECT * FROM vin_status WHERE status = 'failed')",
          ["dataset", "VINs", "status", "retryable", "most attempts", "message"],
          [[r["dataset"], r["vins"], r["http_status"], "yes" if r["retryable"] else "no", r["most_attempts"],
            r["message"]] for r in status["failed"]], "none")
    table("Recall batches in flight", ["batch", "status", "submitted", "VINs", "processed", "run"],
          [[r["batch_id"], r["status"], r["submitted_at"], r["total_vins"] or r["vins_count"], r["processed_vins"],
            r["run_id"]] for r in status["recall_batches_in_flight"]], "none")


def print_services(console: Any, status: dict[str, Any]) -> None:
    """Which service the data came from (the embedded sandbox's is made up), and what a clock did to it."""
    services = status["services"]
    if services:
        said = "; ".join(f"{_service(r['service'])}: {r['answers']:,} answers on {r['vins']:,} vehicles "
                         f"({', '.join(r['datasets'])})" for r in services)
        console.print(f"[bold]Data from[/bold]: {said}", highlight=False, soft_wrap=True)
    future = sum(r["dated_in_the_future"] for r in services)
    if future:
        console.print(f"[bold yellow]Dated in the future[/bold yellow]: {future:,} answers (a clock that was ahead when "
                      "they came): never fresh, the next refresh asks again", highlight=False, soft_wrap=True)
    for run in status["runs_with_clock_behind"]:
        console.print(f"[bold yellow]Clock behind[/bold yellow]: run {run['run_id']} started {_text(run['started_at'])}, "
                      f"before an earlier run ({_text(run['earlier_started_at'])}): its units are counted from the runs "
                      "before it, whatever its clock said", highlight=False, soft_wrap=True)


def _service(name: str | None) -> str:
    from fleet_data.connectors.config import EMBEDDED_SANDBOX

    if name is None:
        return "unknown (landed before services were recorded)"
    return "the embedded sandbox (made-up answers)" if name == EMBEDDED_SANDBOX else name


def _took(run: dict[str, Any]) -> str | None:
    if not run.get("finished_at") or not run.get("started_at"):
        return None
    return f"{(run['finished_at'] - run['started_at']).total_seconds():.0f}s"


def _text(value: Any) -> str:
    if isinstance(value, datetime):
        return f"{value.astimezone(timezone.utc):%Y-%m-%d %H:%M}Z"
    return str(value)
