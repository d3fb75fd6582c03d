"""The run summary, as a terminal table, as markdown (Prefect artifact) and as JSON."""

from __future__ import annotations

from typing import Any

COLUMNS = ("roster", "skipped_fresh", "planned", "estimated_units", "found", "no_data", "failed", "pending", "calls", "units")
HEADERS = ("dataset", "roster", "fresh", "due", "est.units", "found", "no data", "failed", "pending", "calls", "units")


def rows(summary: dict[str, Any]) -> list[list[str]]:
    out = []
    for name, d in summary["datasets"].items():
        out.append([name] + ["" if d.get(c) is None else str(d.get(c)) for c in COLUMNS])
    details = summary.get("recall_details")
    if details and details.get("due"):
        found = details["by_model"] + details["by_vin"]
        out.append(["recall details", "", "", str(details["due"]), "", str(found), "", str(details["failed"]),
                     str(details["pending"]), str(details["calls"]), str(details["units"])])
    return out


def headline(summary: dict[str, Any]) -> str:
    ingest = summary.get("ingest") or {}
    parts = [
        f"run {summary['run_id']}: {summary['status']}",
        f"{ingest.get('rows_in', 0)} rows in, {ingest.get('valid', 0)} VINs, "
        f"{ingest.get('duplicates', 0)} duplicates, {ingest.get('rejected', 0)} rejected",
        f"estimated {summary['estimated_units']} units"
        + (f" (+ up to {summary['recall_detail_ceiling']} for recall details)" if summary.get("recall_detail_ceiling") else ""),
        f"spent {summary['units']} units in {summary['calls']} calls",
    ]
    return "; ".join(parts)


def notes(summary: dict[str, Any]) -> list[str]:
    found = [f"{name}: stopped ({d['stop_reason']}); {d.get('pending') or 0} VINs left pending for the next run"
             for name, d in summary["datasets"].items() if d.get("stop_reason")]
    if summary.get("message"):
        found.insert(0, summary["message"])
    return found


def summary_markdown(summary: dict[str, Any]) -> str:
    lines = [f"# Fleet refresh `{summary['run_id']}`", "", headline(summary), ""]
    lines += ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows(summary)]
    lines += [""] + [f"- {n}" for n in notes(summary)]
    return "\n".join(lines)


def print_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=headline(summary), title_justify="left")
    for h in HEADERS:
        table.add_column(h, justify="left" if h == "dataset" else "right")
    for r in rows(summary):
        table.add_row(*r)
    console = Console(width=None if Console().is_terminal else 120)
    console.print(table)
    for note in notes(summary):
        console.print(f"[yellow]{note}[/yellow]")
