"""The run summary as people read it: a terminal table, markdown (the Prefect artifact) and JSON.

Each function reads the summary's JSON form (`RunSummary.as_json()`, tasks/run/summary.py), the one `--json`
prints: what the run added up while it ran is typed there, and owned by the flow."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleet_data.tasks.plan.due import Plan

COLUMNS = ("roster", "not_applicable", "skipped_fresh", "planned", "estimated_units", "found", "no_data", "failed",
           "pending", "calls", "units")
# n/a: roster VINs the dataset does not apply to (tasks/ingest/markets.py): never called, never failed.
HEADERS = ("dataset", "VINs", "n/a", "fresh", "due", "est.", "found", "none", "failed", "pending", "calls", "units")


def plan_text(plan: "Plan", printed: dict[str, int] | None = None) -> str:
    """The plan as the user sees it before any call: calls and units per endpoint, VINs skipped as fresh.

    `printed`: the run's first plan (`printed_plan`), when this one is made again with the vehicles plates
    found: it then says what they add to that one, in the words of the run's summary (`estimate_text`).
    Columns are as wide as their widest figure, so a million-VIN plan stays aligned and whole."""
    from fleet_data.connectors import ENDPOINTS
    from fleet_data.connectors.config import EMBEDDED_SANDBOX

    if printed is None:
        first = (f"Plan: {plan.estimated_units} units" + (f" from the {plan.service}" if plan.service == EMBEDDED_SANDBOX
                                                             else f" from {plan.service}" if plan.service else "")
                 + (f" (+ up to {plan.recall_detail_ceiling} for recall campaign details)" if plan.recall_detail_ceiling else "")
                 + (f" (+ up to {plan.plate_vehicle_ceiling} for the vehicles plates find)" if plan.plate_vehicle_ceiling else ""))
    else:
        again = {"estimated_units": plan.estimated_units + printed["plates_units"], "planned": printed,
                 "plate_vehicle_units": plan.estimated_units + printed["plates_units"] - printed["estimated_units"],
                 "recall_detail_ceiling": plan.recall_detail_ceiling}
        first = "Plan with the vehicles the plates found: " + estimate_text(again).removeprefix("estimated ")
    rows: list[list[str]] = []
    if plan.plates:  # looked up first: the VINs behind the plates join the roster, then the datasets
        p = plan.plates
        rows.append(["plates", ENDPOINTS["plate"].path, f"{p.lookups} calls", f"{p.estimated_units} units", "", "",
                     f"({p.lookups} plates on {p.rows} rows to look up)"])
    for name, d in plan.datasets.items():
        calls = f"{d.due} VINs" if name == "recalls" else f"{d.due} calls"  # batched, 1 unit per VIN
        rows.append([name, ENDPOINTS[d.endpoint].path, calls, f"{d.estimated_units} units", f"{d.skipped_fresh} fresh",
                     f"{d.not_applicable} not applicable" if d.not_applicable else "", _why_due(d)])
    lines = [first] + ["  " + line for line in aligned(rows, left=(0, 1, 6))]
    if plan.no_data_window:
        lines.append(f"  no data: asked again after {plan.no_data_window} (--fresh no_data=AGE)")
    return "\n".join(lines + asked_again(plan))


def asked_again(plan: "Plan") -> list[str]:
    """Why the plan asks again for answers its windows call fresh: another service gave them, or a clock ahead dated
    them in the future (tasks/plan/due.py)."""
    from fleet_data.tasks.settings import CLOCK_TOLERANCE

    lines = []
    other = sum(d.other_service_due for d in plan.datasets.values())
    if other:
        lines.append(f"  another service: {other} answers from {', '.join(plan.other_services)} are never fresh for "
                     f"{plan.service}: asked again")
    future = sum(d.future_due for d in plan.datasets.values())
    if future:
        lines.append(f"  dated in the future: {future} answers dated more than {CLOCK_TOLERANCE.seconds // 60} minutes "
                     "ahead of this clock (a clock that was ahead when they came) are not fresh: asked again")
    return lines


def _why_due(d: Any) -> str:
    """What a plan line says of its VINs due for another reason than freshness, and what those cost."""
    parts = [f"{d.pending_due} left pending", f"{d.failed_due} failed before"] if d.pending_due or d.failed_due else []
    if parts:
        parts = [" and ".join(p for p, n in zip(parts, (d.pending_due, d.failed_due)) if n)
                 + f": {(d.pending_due + d.failed_due) * d.unit_cost} units"]
    parts += [f"{n} {why}" for n, why in ((d.no_data_due, "no data before"), (d.other_service_due, "from another service"),
                                           (d.future_due, "dated in the future")) if n]
    return f"({', '.join(parts)})" if parts else ""


def aligned(rows: list[list[str]], left: tuple[int, ...] = (0,), gap: str = "  ") -> list[str]:
    """Rows of cells as lines: each column as wide as its widest cell (never cut), numbers to the right, no
    trailing space. `left`: the columns aligned to the left."""
    widths = [max((len(r[i]) for r in rows if i < len(r)), default=0) for i in range(max(map(len, rows), default=0))]
    lines = []
    for r in rows:
        cells = [c.ljust(widths[i]) if i in left else c.rjust(widths[i]) for i, c in enumerate(r)]
        lines.append(gap.join(cells).rstrip())
    return lines


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
NO_CHANGE = "No changes since the vehicles' previous answers."
NOTHING_ANSWERED = "No answer came back in this run, so nothing could change."
FIRST_ANSWERS = ("First answers for these vehicles: nothing to compare with yet (a change is a difference from a "
                 "vehicle's previous answer).")


def _count(n: int, singular: str, plural: str) -> str:
    return f"{n} {singular if n == 1 else plural}"


def change_lines(changes: dict[str, Any] | None, strong: Any = str) -> list[str]:
    """What a run changed, in the words a fleet manager reads first: who must park, then counts per kind."""
    if not changes or not changes.get("total"):
        return [NO_CHANGE]
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


def run_change_lines(summary: dict[str, Any], strong: Any = str) -> list[str]:
    """The run's change lines; when it changed nothing, why: nothing answered, only first answers (nothing to
    compare with), or answers equal to the previous ones."""
    changes = summary.get("changes")
    if changes and changes.get("total"):
        return change_lines(changes, strong)
    parts = [*summary.get("datasets", {}).values(), summary.get("recall_details") or {}]
    answered = [d for d in parts if (d.get("found") or 0) + (d.get("no_data") or 0)
                or (d.get("by_vin") or 0) + (d.get("by_model") or 0)]
    if not answered:
        return [NOTHING_ANSWERED]
    before = [d.get("answered_before") for d in summary.get("datasets", {}).values()
              if (d.get("found") or 0) + (d.get("no_data") or 0)]
    if before and all(b == 0 for b in before):  # counted by the plan, and none had an earlier answer
        return [FIRST_ANSWERS]
    return [NO_CHANGE]


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


def headline_parts(summary: dict[str, Any]) -> list[str]:
    """The run, its rows, its estimate and its spend: one part each (a line each when printed)."""
    ingest = summary.get("ingest") or {}
    rows_text = (f"{ingest.get('rows_in', 0)} rows in, {ingest.get('valid', 0)} VINs, "
                 f"{ingest.get('duplicates', 0)} duplicates, {ingest.get('rejected', 0)} rejected"
                 # A dry run looks no plate up: its rows waiting for a lookup are neither VINs nor rejected yet.
                 + (f", {ingest['plates_waiting']} to look up by plate" if ingest.get("plates_waiting") else ""))
    return [f"run {summary['run_id']}: {summary['status']}"
            + (f" ({service_line(summary)})" if summary.get("service") else ""), rows_text + plate_text(summary), estimate_text(summary),
            f"spent {summary['units']} units in {summary['calls']} calls"
            + (f" (+ up to {summary['possible_units']} for calls never answered)" if summary.get("possible_units") else "")]


def plate_text(summary: dict[str, Any]) -> str:
    """Where the rows with a plate instead of a VIN went, in the plan's words ("N plates on M rows")."""
    plates = summary.get("plates")
    if not plates:
        return ""
    waiting = plates.get("waiting", 0)
    others = plates["rows"] - plates["known"] - waiting  # refused before any lookup (rejected_rows says why)
    looked = plates["found"] + plates["not_found"] + plates["failed"]
    parts = [f"{plates['known']} known from an earlier lookup"] if plates["known"] else []
    if waiting and looked:
        parts.append(f"{waiting} looked up ({plates['lookups']} plates: {plates['found']} found, "
                     f"{plates['not_found']} not found" + (f", {plates['failed']} failed" if plates["failed"] else "")
                     + (f", {plates['not_looked_up']} not looked up" if plates["not_looked_up"] else "") + ")")
    elif waiting:
        parts.append(f"{waiting} to look up ({plates['lookups']} plates)")
    if others:
        parts.append(f"{others} rejected before any lookup")
    return f" ({plates['rows']} rows with a plate instead of a VIN: {', '.join(parts)})"


def estimate_text(summary: dict[str, Any]) -> str:
    """The estimate as the plan printed it, and what the vehicles plates found added to it."""
    planned = summary.get("planned") or {}
    estimated = summary["estimated_units"]
    text = f"estimated {estimated} units"
    if "plate_vehicle_units" in summary and planned:  # plates looked up: what they found is priced now
        text += (f" ({planned['estimated_units']} planned + {summary['plate_vehicle_units']} for the vehicles the "
                 f"plates found, of up to {planned['plate_vehicle_ceiling']} planned)")
    elif summary.get("plate_vehicle_ceiling"):
        text += f" (+ up to {summary['plate_vehicle_ceiling']} for the vehicles plates find)"
    ceiling = summary.get("recall_detail_ceiling")
    if ceiling:
        before = planned.get("recall_detail_ceiling", ceiling)
        more = f": {before} planned + {ceiling - before} for the vehicles the plates found" if ceiling != before else ""
        text += f" (+ up to {ceiling} for recall campaign details{more})"
    return text


def headline(summary: dict[str, Any]) -> str:
    return "; ".join(headline_parts(summary))


def service_line(summary: dict[str, Any]) -> str:
    """Where the run's answers come from, in words: the embedded sandbox's are made up."""
    from fleet_data.connectors.config import EMBEDDED_SANDBOX

    service = summary.get("service")
    if service == EMBEDDED_SANDBOX:
        return "answers from the embedded sandbox: made up, for trying the tool"
    return f"answers from {service}"


def notes(summary: dict[str, Any]) -> list[str]:
    found = [f"{name}: stopped ({d['stop_reason']}); {d.get('pending') or 0} VINs left pending for the next run"
             for name, d in summary["datasets"].items() if d.get("stop_reason")]
    plates = summary.get("plates") or {}
    if plates.get("stop_reason"):
        found.insert(0, f"plates: stopped ({plates['stop_reason']}); {plates['not_looked_up']} plates not looked up, "
                        "their rows rejected as plate_not_looked_up until the next run")
    if summary.get("message"):
        found.insert(0, summary["message"])
    again = [f"{d['other_service']} {name} answers of another service" for name, d in summary["datasets"].items()
             if d.get("other_service")]
    again += [f"{d['future_dated']} {name} answers dated in the future" for name, d in summary["datasets"].items()
              if d.get("future_dated")]
    if again:
        found.append(f"asked again, though within their freshness windows: {', '.join(again)} (never fresh)")
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
        lines += [f"- {line}" for line in run_change_lines(summary, strong=lambda s: f"**{s}**")] + [""]
    lines += [headline(summary), ""]
    lines += ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows(summary)]
    lines += [""] + [f"- {n}" for n in notes(summary)]
    return "\n".join(lines)


def summary_lines(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The printed summary as (style, line): whole lines, no trailing space, the table's figures never cut."""
    said: list[tuple[str, str]] = []
    if "changes" in summary:  # what changed leads: who must park, then counts per kind
        said += [("bold red" if " must be parked " in line else "", line) for line in run_change_lines(summary)]
    said += [("bold" if i == 0 else "", part) for i, part in enumerate(headline_parts(summary))]
    table = [list(HEADERS), *rows(summary)]
    said += [("", line) for line in aligned(table, gap="  ")]
    said += [("yellow", note) for note in notes(summary)]
    if summary.get("report"):  # where to look next: the page, and its to-do list for spreadsheets
        said.append(("", f"report: {summary['report']}" + (f"; to-do list: {summary['todo']}" if summary.get("todo") else "")))
    return said


def print_summary(summary: dict[str, Any]) -> None:
    """On a terminal with colour (rich, never wrapping or cutting a line itself); elsewhere plain lines."""
    import sys

    said = summary_lines(summary)
    if not sys.stdout.isatty():
        print("\n".join(line for _, line in said), flush=True)
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(soft_wrap=True, highlight=False)
    for style, line in said:
        console.print(Text(line, style=style))


def report(summary: dict[str, Any], as_json: bool) -> None:
    """What `fleet refresh` and `fleet backfill` print when they finish."""
    if as_json:
        import json

        print(json.dumps(summary, indent=2, default=str))
    else:
        print_summary(summary)
