"""`fleet status`: where the pipeline stands, read from the published database alone.

Last runs, units spent per endpoint this calendar month (UTC) as known plus possible (calls never answered,
which the service may have billed: docs/ledger.md), damaged answer journals kept in quarantine, per dataset the roster
VINs never answered (pending; those it does not apply to, registered outside its markets, apart)
and the open failures, and recall batches still in flight;
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
    from fleet_data.tasks.store.published import open_published

    from fleet_data.tasks.settings import CLOCK_TOLERANCE

    now = now or datetime.now(timezone.utc)
    since = month_start(now)
    # Looked at before and after reading the snapshot: a run that ends (or starts) meanwhile is
    # still recognised as the live one rather than shown interrupted.
    before = live_run(db_path)
    with open_published(db_path) as db:
        recent = db.query("status_recent_runs", limit=runs).to_dicts()
        spent = db.query("units_by_endpoint_since", since=since, now=now).to_dicts()  # whatever the runs' clocks said
        services = db.query("status_services", future_after=now + CLOCK_TOLERANCE).to_dicts()
        clock_behind = db.query("status_clock_behind_runs", tolerance_seconds=int(CLOCK_TOLERANCE.total_seconds())).to_dicts()
        datasets = db.query("status_by_dataset", datasets=list(DEFAULT_DATASETS)).to_dicts()
        unanswered = _unanswered(db, [d["dataset"] for d in datasets])
        batches = db.query("unfinished_recall_batches").select(BATCH_COLUMNS).to_dicts()
    for row in datasets:  # never answered: not applicable (never called) or pending (the next refresh calls)
        row["not_applicable"], row["pending"] = unanswered.get(row["dataset"], (0, row["pending"]))
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
        "recall_batches_in_flight": batches,
        "services": services,  # where the roster's current answers came from (NULL: before services were recorded)
        "runs_with_clock_behind": clock_behind,
    }


def _unanswered(db: Any, datasets: list[str]) -> dict[str, tuple[int, int]]:
    """Per dataset, the roster VINs never answered: (outside its markets, inside them), by the plan's rule
    (tasks/ingest/markets.py, the registry's markets) over the roster's few distinct market groups."""
    from fleet_data.tasks.datasets import REGISTRY
    from fleet_data.tasks.ingest.markets import applies, with_market

    groups = db.query("status_roster_markets", datasets=datasets)
    if not groups.height:
        return {}
    groups = with_market(groups)
    out: dict[str, tuple[int, int]] = {}
    for dataset in datasets:
        markets = REGISTRY[dataset].markets if dataset in REGISTRY else None
        rows = groups.filter(groups["dataset"] == dataset)
        outside = inside = 0
        for market, roster, answered in rows.select("market", "roster", "answered").iter_rows():
            if applies(markets, market):
                inside += roster - answered
            else:
                outside += roster - answered
        out[dataset] = (outside, inside)
    return out


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
    table("Datasets (pending = roster VINs never answered that it applies to; not applicable = registered outside "
          "its markets, never called; failed = open failures)",
          ["dataset", "roster", "answered", "of which no data", "not applicable", "pending", "failed",
           "of which retryable", "last answer"],
          [[r["dataset"], r["roster"], r["answered"], r["no_data"], r["not_applicable"], r["pending"], r["failed"],
            r["failed_retryable"], r["last_fetched_at"]] for r in status["datasets"]], "no roster yet")
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
