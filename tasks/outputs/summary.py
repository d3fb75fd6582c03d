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
    summary: dict[str, Any] = {
        "run_id": run_id,
        "kind": kind,
        "status": "running",
        "service": plan.service,  # where its answers come from (connectors/config.py `service_name`); never the key
        "ingest": ingest,
        "estimated_units": plan.estimated_units,
        "recall_detail_ceiling": plan.recall_detail_ceiling,
        # The plan as printed before any call (`plan_text`); `estimated_units` grows once plates find vehicles.
        "planned": {"estimated_units": plan.estimated_units, "recall_detail_ceiling": plan.recall_detail_ceiling,
                    "plate_vehicle_ceiling": plan.plate_vehicle_ceiling},
        "units": 0,
        "possible_units": 0,  # what calls never answered (timed out, dropped) may have cost besides `units`
        "calls": 0,
        "datasets": {
            name: {"roster": d.roster, "not_applicable": d.not_applicable, "skipped_fresh": d.skipped_fresh,
                   "planned": d.due, "estimated_units": d.estimated_units,
                   "other_service": d.other_service_due, "future_dated": d.future_due,
                   "found": 0, "no_data": 0, "failed": 0, "pending": 0, "calls": 0, "units": 0, "possible_units": 0,
                   "stop_reason": None, "answered_before": d.answered_before}
            for name, d in plan.datasets.items()
        },
    }
    for d in plan.datasets.values():
        if d.unit_unknown:  # asked without a mileage: its unit cannot be known (tasks/datasets.py valuation_request)
            summary["mileage_unit_unknown"] = {"dataset": d.dataset, "vehicles": d.unit_unknown, "vins": d.unit_unknown_vins}
    if ingest.get("plate_rows"):
        summary["plate_vehicle_ceiling"] = plan.plate_vehicle_ceiling
        summary["plates"] = {"rows": ingest["plate_rows"], "known": ingest.get("plates_known", 0),
                             "waiting": ingest.get("plates_waiting", 0),  # rows to look up (the rest: known or rejected)
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
    summary["plate_vehicle_units"] = 0  # until `replan` prices the vehicles they found
    return budget_left(budget, outcome["units"])


def replan(summary: dict[str, Any], plan: "Plan") -> None:
    """The plan made again once plates found their VINs: the datasets' figures now include those vehicles.

    `planned` keeps the plan as printed; `plate_vehicle_units` is what the found vehicles added to it, so the
    summary's estimate is the printed one plus that (`estimate_text`)."""
    fresh = start_summary(summary["run_id"], summary["ingest"], plan, summary.get("kind", "refresh"))
    for key in ("recall_detail_ceiling", "datasets", "service"):
        summary[key] = fresh[key]
    summary.pop("mileage_unit_unknown", None)
    if "mileage_unit_unknown" in fresh:
        summary["mileage_unit_unknown"] = fresh["mileage_unit_unknown"]
    estimated = fresh["estimated_units"] + (summary.get("plates") or {}).get("estimated_units", 0)
    summary["plate_vehicle_units"] = estimated - summary["planned"]["estimated_units"]
    summary["estimated_units"] = estimated
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
    if summary["status"] == "partial" and not summary.get("message"):  # runs.message says why, as for the others
        summary["message"] = partial_message(summary)
    if cancelled:
        left = sum(c.get("pending") or 0 for c in [*summary["datasets"].values(), details])
        summary["message"] = (f"cancelled by a stop signal: no call started after it; answers not landed yet land in the next run; "
                              f"{left} VIN-datasets left pending for the next run")


def partial_message(summary: dict[str, Any]) -> str:
    """Why a run ended partial, in one line: what it left pending and what failed (the view vin_status lists them)."""
    parts = [*summary["datasets"].values(), summary.get("recall_details") or {}]
    pending, failed = (sum(c.get(k) or 0 for c in parts) for k in ("pending", "failed"))
    plates = summary.get("plates") or {}
    words = [f"{pending} VIN-datasets left pending" if pending else "", f"{failed} failed" if failed else "",
             f"{plates.get('not_looked_up') or 0} plates not looked up" if plates.get("not_looked_up") else "",
             f"{plates.get('failed') or 0} plate lookups failed" if plates.get("failed") else ""]
    return (", ".join(w for w in words if w) + ": the next refresh asks again for what is pending and the failures "
            "worth retrying (view vin_status)")


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


def printed_plan(summary: dict[str, Any]) -> dict[str, int]:
    """The run's first plan, as `plan_text` printed it, for the plan made again once plates found vehicles."""
    return {**summary["planned"], "plates_units": (summary.get("plates") or {}).get("estimated_units", 0)}


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
