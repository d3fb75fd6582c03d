"""The run summary, as a terminal table, as markdown (Prefect artifact) and as JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleet_data.tasks.plan.due import Plan

COLUMNS = ("roster", "not_applicable", "skipped_fresh", "planned", "estimated_units", "found", "no_data", "failed",
           "pending", "calls", "units")
# n/a: roster VINs the dataset does not apply to (tasks/ingest/markets.py): never called, never failed.
HEADERS = ("dataset", "VINs", "n/a", "fresh", "due", "est.", "found", "none", "failed", "pending", "calls", "units")


# --- bookkeeping: pure functions the flows use to add up what their tasks report ---------------------


def record_chunk(counts: dict[str, Any], result: dict[str, Any]) -> int:
    add_counts(counts, **{k: v for k, v in result.items() if k != "stop_reason"})
    counts["stop_reason"] = counts["stop_reason"] or result["stop_reason"]
    return result["units"]


def record_batch(summary: dict[str, Any], outcome: dict[str, Any], budget: int | None) -> int | None:
    add_counts(summary["datasets"]["recalls"], found=outcome["checked"], failed=outcome["failed"],
               pending=outcome["pending"], calls=outcome["calls"], units=outcome["units"],
               stop_reason=outcome["stop_reason"])
    return budget_left(budget, outcome["units"])


def start_summary(run_id: str, ingest: dict[str, int], plan: "Plan", kind: str = "refresh") -> dict[str, Any]:
    summary = {
        "run_id": run_id,
        "kind": kind,
        "status": "running",
        "ingest": ingest,
        "estimated_units": plan.estimated_units,
        "recall_detail_ceiling": plan.recall_detail_ceiling,
        "units": 0,
        "possible_units": 0,  # what calls never answered (timed out, dropped) may have cost besides `units`
        "calls": 0,
        "datasets": {
            name: {"roster": d.roster, "not_applicable": d.not_applicable, "skipped_fresh": d.skipped_fresh,
                   "planned": d.due, "estimated_units": d.estimated_units,
                   "found": 0, "no_data": 0, "failed": 0, "pending": 0, "calls": 0, "units": 0, "possible_units": 0,
                   "stop_reason": None}
            for name, d in plan.datasets.items()
        },
    }
    for d in plan.datasets.values():
        if d.unit_unknown:  # asked without a mileage: its unit cannot be known (tasks/datasets.py valuation_request)
            summary["mileage_unit_unknown"] = {"dataset": d.dataset, "vehicles": d.unit_unknown, "vins": d.unit_unknown_vins}
    if ingest.get("plate_rows"):
        summary["plate_vehicle_ceiling"] = plan.plate_vehicle_ceiling
        summary["plates"] = {"rows": ingest["plate_rows"], "known": ingest.get("plates_known", 0),
                             "lookups": plan.plates.lookups if plan.plates else 0,
                             "estimated_units": plan.plates.estimated_units if plan.plates else 0,
                             "found": 0, "not_found": 0, "failed": 0, "not_looked_up": 0, "calls": 0, "units": 0,
                             "stop_reason": None}
    return summary


def record_plates(summary: dict[str, Any], outcome: dict[str, Any], budget: int | None) -> int | None:
    """The plate lookups' outcome: rows waiting for them now count as valid, duplicates or rejected."""
    add_counts(summary["plates"], **{k: outcome[k] for k in ("found", "not_found", "failed", "not_looked_up", "calls",
                                                           "units")}, stop_reason=outcome["stop_reason"])
    ingest = summary["ingest"]
    add_counts(ingest, valid=outcome["valid"], duplicates=outcome["duplicates"], rejected=outcome["rejected"])
    ingest["plates_waiting"] = 0
    add_counts(summary, calls=outcome["calls"], units=outcome["units"])
    return budget_left(budget, outcome["units"])


def replan(summary: dict[str, Any], plan: "Plan") -> None:
    """The plan made again once plates found their VINs: the datasets' figures now include those vehicles."""
    fresh = start_summary(summary["run_id"], summary["ingest"], plan, summary.get("kind", "refresh"))
    for key in ("recall_detail_ceiling", "datasets"):
        summary[key] = fresh[key]
    summary.pop("mileage_unit_unknown", None)
    if "mileage_unit_unknown" in fresh:
        summary["mileage_unit_unknown"] = fresh["mileage_unit_unknown"]
    summary["estimated_units"] = fresh["estimated_units"] + (summary.get("plates") or {}).get("estimated_units", 0)
    summary["plate_vehicle_ceiling"] = 0


def add_counts(target: dict[str, Any], stop_reason: str | None = None, **amounts: int) -> None:
    for key, value in amounts.items():
        target[key] = (target.get(key) or 0) + (value or 0)
    if stop_reason:
        target["stop_reason"] = target.get("stop_reason") or stop_reason


def budget_left(budget: int | None, spent: int) -> int | None:
    return None if budget is None else max(0, budget - spent)


def final_status(summary: dict[str, Any], cancelled: bool = False) -> None:
    """Total the datasets and say whether anything was left failed or pending, or the run was cancelled
    (a stop signal: tasks/control/signals.py); a cancelled run's status says so whatever it had finished."""
    for counts in summary["datasets"].values():
        add_counts(summary, calls=counts["calls"], units=counts["units"], possible_units=counts.get("possible_units", 0))
    details = summary.get("recall_details") or {}
    plates = summary.get("plates") or {}
    unfinished = any(c.get("failed") or c.get("pending") for c in [*summary["datasets"].values(), details])
    unfinished = unfinished or bool(plates.get("failed") or plates.get("not_looked_up"))
    summary["status"] = "cancelled" if cancelled else "partial" if unfinished else "completed"
    if cancelled:
        left = sum(c.get("pending") or 0 for c in [*summary["datasets"].values(), details])
        summary["message"] = (f"cancelled by a stop signal: no call started after it; answers not landed yet land in the next run; "
                              f"{left} VIN-datasets left pending for the next run")


def plan_text(plan: "Plan") -> str:
    """The plan as the user sees it before any call: calls and units per endpoint, VINs skipped as fresh."""
    from fleet_data.connectors import ENDPOINTS

    lines = [f"Plan: {plan.estimated_units} units"
             + (f" (+ up to {plan.recall_detail_ceiling} for recall campaign details)" if plan.recall_detail_ceiling else "")
             + (f" (+ up to {plan.plate_vehicle_ceiling} for the vehicles plates find)" if plan.plate_vehicle_ceiling else "")]
    if plan.plates:  # looked up first: the VINs behind the plates join the roster, then the datasets
        p = plan.plates
        lines.append(f"  {'plates':<13}{ENDPOINTS['plate'].path:<25}{f'{p.lookups} calls':>11}{p.estimated_units:>8} units"
                     f"  ({p.rows} rows without a VIN)")
    for name, d in plan.datasets.items():
        calls = f"{d.due} VINs" if name == "recalls" else f"{d.due} calls"  # batched, 1 unit per VIN
        again = f"  ({d.no_data_due} no data before)" if d.no_data_due else ""
        lines.append(f"  {name:<13}{ENDPOINTS[d.endpoint].path:<25}{calls:>11}{d.estimated_units:>8} units"
                     f"{d.skipped_fresh:>7} fresh"
                     + (f"{d.not_applicable:>7} not applicable" if d.not_applicable else "") + again)
    if plan.no_data_window:
        lines.append(f"  no data: asked again after {plan.no_data_window} (--fresh no_data=AGE)")
    return "\n".join(lines)


# --- presentation ------------------------------------------------------------------------------------

# Each kind of change in words (singular, plural), in the order a summary lists them after the counts.
CHANGE_WORDS = {
    "new_recall": ("new recall", "new recalls"), "closed_recall": ("closed recall", "closed recalls"),
    "new_theft": ("new theft", "new thefts"), "new_lien": ("new lien", "new liens"),
    "new_title_brand": ("new title brand", "new title brands"),
    "odometer_rollback": ("odometer rollback", "odometer rollbacks"),
    "value_move": ("value move", "value moves"), "decode_changed": ("new decode", "new decodes"),
    "revaluation": ("revaluation at another mileage", "revaluations at another mileage"),
    "released_lien": ("released lien", "released liens"), "recovered_theft": ("recovered theft", "recovered thefts"),
    "cleared_title_brand": ("cleared title brand", "cleared title brands"),
    "new_lien_theft_event": ("other lien/theft event", "other lien/theft events"),
}


def _count(n: int, singular: str, plural: str) -> str:
    return f"{n} {singular if n == 1 else plural}"


def change_lines(changes: dict[str, Any] | None, strong: Any = str) -> list[str]:
    """What a run changed, in the words a fleet manager reads first: who must park, then counts per kind."""
    if not changes or not changes.get("total"):
        return ["No changes since the vehicles' previous answers."]
    lines = []
    if changes.get("park_now"):
        named = ", ".join(f"{v['unit_number'] or v['vin']} ({v['vin']}: {', '.join(v['campaigns'])})"
                          if v.get("unit_number") else f"{v['vin']} ({', '.join(v['campaigns'])})"
                          for v in changes.get("park_now_vehicles", []))
        more = changes["park_now"] - len(changes.get("park_now_vehicles", []))
        lines.append(strong(f"{_count(changes['park_now'], 'vehicle', 'vehicles')} must be parked now")
                     + f" (new park-it recall): {named}" + (f" and {more} more" if more > 0 else ""))
    if changes.get("park_outside"):
        lines.append(strong(f"{_count(changes['park_outside'], 'vehicle', 'vehicles')} must be parked outside")
                     + " (new park-outside recall: a fire risk)")
    kinds = ", ".join(_count(n, *CHANGE_WORDS.get(kind, (kind, kind))) for kind, n in changes["by_kind"].items())
    lines.append(f"{_count(changes['total'], 'change', 'changes')} on "
                 f"{_count(changes['vehicles'], 'vehicle', 'vehicles')}: {kinds}")
    return lines



def rows(summary: dict[str, Any]) -> list[list[str]]:
    out = []
    plates = summary.get("plates")
    if plates:  # VINs = rows with a plate instead; fresh = found by an earlier run's lookup; due = lookups
        out.append(["plates", str(plates["rows"]), "", str(plates["known"]),
                    *(str(plates[k]) for k in ("lookups", "estimated_units", "found", "not_found", "failed",
                                               "not_looked_up", "calls", "units"))])
    for name, d in summary["datasets"].items():
        out.append([name] + ["" if d.get(c) is None else str(d.get(c)) for c in COLUMNS])
    details = summary.get("recall_details")
    if details and details.get("due"):
        found = details["by_model"] + details["by_vin"]
        out.append(["recall details", "", "", "", str(details["due"]), "", str(found), "", str(details["failed"]),
                     str(details["pending"]), str(details["calls"]), str(details["units"])])
    return out


def headline(summary: dict[str, Any]) -> str:
    ingest = summary.get("ingest") or {}
    parts = [
        f"run {summary['run_id']}: {summary['status']}",
        f"{ingest.get('rows_in', 0)} rows in, {ingest.get('valid', 0)} VINs, "
        f"{ingest.get('duplicates', 0)} duplicates, {ingest.get('rejected', 0)} rejected"
        + (f" ({ingest['plate_rows']} with a plate instead of a VIN)" if ingest.get("plate_rows") else "")
        # A dry run looks no plate up: its rows waiting for a lookup are neither VINs nor rejected yet.
        + (f", {ingest['plates_waiting']} to look up by plate" if ingest.get("plates_waiting") else ""),
        f"estimated {summary['estimated_units']} units"
        + (f" (+ up to {summary['recall_detail_ceiling']} for recall details)" if summary.get("recall_detail_ceiling") else "")
        + (f" (+ up to {summary['plate_vehicle_ceiling']} for the vehicles plates find)"
           if summary.get("plate_vehicle_ceiling") else ""),
        f"spent {summary['units']} units in {summary['calls']} calls"
        + (f" (+ up to {summary['possible_units']} for calls never answered)" if summary.get("possible_units") else ""),
    ]
    return "; ".join(parts)


def notes(summary: dict[str, Any]) -> list[str]:
    found = [f"{name}: stopped ({d['stop_reason']}); {d.get('pending') or 0} VINs left pending for the next run"
             for name, d in summary["datasets"].items() if d.get("stop_reason")]
    plates = summary.get("plates") or {}
    if plates.get("stop_reason"):
        found.insert(0, f"plates: stopped ({plates['stop_reason']}); {plates['not_looked_up']} plates not looked up, "
                        "their rows rejected as plate_not_looked_up until the next run")
    if summary.get("message"):
        found.insert(0, summary["message"])
    if summary.get("possible_units"):
        found.append(f"{summary['possible_units']} units possibly spent besides: calls sent and never answered (timed "
                     "out, connection dropped), which the service may have billed (api_calls.billing = 'unknown')")
    unknown = summary.get("mileage_unit_unknown")
    if unknown:
        named = ", ".join(unknown["vins"]) + (", ..." if unknown["vehicles"] > len(unknown["vins"]) else "")
        found.append(f"{unknown['dataset']}: {unknown['vehicles']} Canadian vehicles valued without their mileage, whose "
                     f"unit (km or mi) the fleet file does not say ({named}): say it in the cell (12 345 km) or the "
                     "header (odometer_km)")
    if summary.get("quarantined_journals"):
        found.append(f"{summary['quarantined_journals']} damaged answer journals kept in quarantine, their readable "
                     f"answers landed: {summary.get('quarantine_folder')} (docs/ledger.md)")
    return found


def summary_markdown(summary: dict[str, Any]) -> str:
    lines = [f"# Fleet {summary.get('kind', 'refresh')} `{summary['run_id']}`", ""]
    if "changes" in summary:  # what changed leads: who must park, then counts per kind
        lines += [f"- {line}" for line in change_lines(summary["changes"], strong=lambda s: f"**{s}**")] + [""]
    lines += [headline(summary), ""]
    lines += ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows(summary)]
    lines += [""] + [f"- {n}" for n in notes(summary)]
    return "\n".join(lines)


def print_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from rich import box

    # Compact enough for an 80-column terminal; the headline carries the totals.
    table = Table(title=headline(summary), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for h in HEADERS:
        table.add_column(h, justify="left" if h == "dataset" else "right")
    for r in rows(summary):
        table.add_row(*r)
    console = Console(width=None if Console().is_terminal else 100)
    if "changes" in summary:  # what changed leads: who must park, then counts per kind
        from rich.text import Text

        for line in change_lines(summary["changes"]):
            console.print(Text(line, style="bold red" if " must be parked " in line else ""))
    console.print(table)
    for note in notes(summary):
        console.print(f"[yellow]{note}[/yellow]")
    if summary.get("report"):  # where to look next: the page, and its to-do list for spreadsheets
        console.print(f"report: {summary['report']}" + (f"; to-do list: {summary['todo']}" if summary.get("todo") else ""),
                      highlight=False, soft_wrap=True)


def report(summary: dict[str, Any], as_json: bool) -> None:
    """What `fleet refresh` and `fleet backfill` print when they finish."""
    if as_json:
        import json

        print(json.dumps(summary, indent=2, default=str))
    else:
        print_summary(summary)
