"""The fleet report: one self-contained HTML page a fleet manager opens in a browser.

`fleet report` builds it from the published database, read-only; every refresh writes it next to
the lake, with the to-do list beside it as CSV (tasks/outputs/todo.py). It opens with what needs doing, then
what changed in the latest run, then the fleet's value, recalls and history; headline figures are
current states (stolen and not recovered, not any theft record). It reads on a phone (390 px) with
no sideways scrolling and prints. Everything the page needs is inside the file (plotly.js, the data, a small table sorter),
and its Content-Security-Policy forbids any request, so it opens the same way offline, attached to
an e-mail or from a share. The figures come from the named queries `sql/queries/report_*.sql`;
the elements showing the headline figures carry ids and `data-value` attributes (tests read them).
"""

from __future__ import annotations

import html
import json
import logging
import math
import os
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from fleet_data.tasks.plan.due import (
    ALL_DATASETS,
    DEFAULT_DATASETS,
    DEFAULT_FRESHNESS,
    DEFAULT_NO_DATA_FRESHNESS,
)
from fleet_data.tasks.outputs.report_assets import CSS, PAGE, PLOT, SORTER
from fleet_data.tasks.outputs.todo import NEW_BRAND_DAYS, gather_todo, todo_path, write_todo_csv

logger = logging.getLogger(__name__)

ROWS_SHOWN = 500  # long lists are cut here (the headline counts them all); the views hold every row
TOP_MAKES = 8  # the value-by-make chart shows the largest makes, the rest as "Other"
CHART_CONFIG = {"displaylogo": False, "responsive": True}
KEEP_WHOLE = {"VIN", "unit", "campaign", "to do", "severity"}  # table columns whose values are never broken across lines
CHANGES_SHOWN = 500  # changes listed; the section says how many there were
# No request of any kind may leave the page: scripts and styles are inline, images data: URLs.
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:"


class Source(Protocol):
    """What the report reads from: `Published` (read-only snapshot) or the working `Database`."""

    def query(self, name: str, **params: Any) -> pl.DataFrame: ...


@dataclass
class ReportData:
    headline: dict[str, Any]
    last_run: dict[str, Any] | None
    value_by_month: pl.DataFrame
    value_today: pl.DataFrame
    recalls_by_component: pl.DataFrame
    vehicles_to_park: pl.DataFrame
    title_brands: pl.DataFrame
    lien_theft: pl.DataFrame
    flagged_vehicles: pl.DataFrame
    flagged_count: int
    todo: pl.DataFrame
    mileage_conflicts: pl.DataFrame
    changes: pl.DataFrame
    changes_run: dict[str, Any] | None
    freshness: pl.DataFrame
    units_by_month: pl.DataFrame
    generated_at: datetime


def gather(source: Source, now: datetime | None = None) -> ReportData:
    now = now or datetime.now(UTC)
    freshness = source.query(
        "report_freshness", datasets=list(DEFAULT_FRESHNESS),
        window_hours=[int(w.total_seconds() // 3600) for w in DEFAULT_FRESHNESS.values()],
        no_data_hours=int(DEFAULT_NO_DATA_FRESHNESS.total_seconds() // 3600), now=now,
    )
    # Datasets a refresh does not ask for by default (ownership) show only once they have answers or failures.
    freshness = freshness.filter(pl.col("dataset").is_in(DEFAULT_DATASETS) | (pl.col("roster") > pl.col("never_answered"))
                                 | (pl.col("failed") > 0))
    freshness = freshness.sort(pl.col("dataset").replace_strict({d: i for i, d in enumerate(ALL_DATASETS)}, default=99))
    last_run = source.query("report_last_run")
    changes_run = source.query("report_changes_run")
    todo, conflicts = gather_todo(source, now)
    return ReportData(
        headline=source.query("report_headline").row(0, named=True),
        last_run=last_run.row(0, named=True) if last_run.height else None,
        value_by_month=source.query("report_value_by_month"),
        value_today=source.query("report_value_today"),
        recalls_by_component=source.query("report_recalls_by_component"),
        vehicles_to_park=source.query("report_vehicles_to_park", limit=ROWS_SHOWN),
        title_brands=source.query("report_title_brands"),
        lien_theft=source.query("report_lien_theft"),
        flagged_vehicles=source.query("report_title_lien_theft_vehicles", limit=ROWS_SHOWN),
        flagged_count=int(source.query("report_title_lien_theft_count").item()),
        todo=todo, mileage_conflicts=conflicts,
        changes=source.query("report_changes", limit=CHANGES_SHOWN),
        changes_run=changes_run.row(0, named=True) if changes_run.height else None,
        freshness=freshness,
        units_by_month=source.query("report_units_by_month"),
        generated_at=now,
    )


def build_report(source: Source, database: str, now: datetime | None = None) -> tuple[str, ReportData]:
    """The page's HTML and the figures it shows (`data.todo` is the to-do list, for `write_todo_csv`)."""
    data = gather(source, now)
    return render(data, database), data


def write_report_files(page: str, data: ReportData, out: str | Path) -> tuple[Path, Path]:
    """The page at `out` and its to-do list beside it (`todo_path`)."""
    return write_report(page, out), write_todo_csv(data.todo, todo_path(out))


def write_run_report(source: Source, db: str, lake: str | None) -> tuple[Path | None, str | None]:
    """A run's report, written next to the lake (else beside the database): (where, None) or (None, why not).

    The run's data has landed by then: a report that cannot be written is said, never fails the run.
    """
    try:
        page, data = build_report(source, db)
        return write_report_files(page, data, report_path(db, lake))[0], None
    except Exception as exc:  # noqa: BLE001 - any failure here is the report's, not the run's
        problem = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        logger.warning("the fleet report was not written: %s", problem)
        return None, problem


def report_markdown(path: Path | None, problem: str | None) -> str:
    """The line the run's Prefect artifact ends with: a link to the report, or why there is none."""
    if path is not None:
        where, todo = path.resolve(), todo_path(path.resolve())
        return (f"\n\n**Fleet report**: [{where.name}]({where.as_uri()}) (`{where}`); "
                f"to-do list for spreadsheets: [{todo.name}]({todo.as_uri()}) (`{todo}`)")
    return f"\n\n**Fleet report** not written: {problem}" if problem else ""


def report_path(db: str | Path, lake: str | Path | None) -> Path:
    """Where a refresh writes the report: in the lake, else beside the database."""
    return Path(lake) / "report.html" if lake else Path(db).with_suffix(".report.html")


def write_report(page: str, out: str | Path) -> Path:
    """Write the page at `out` whole or not at all (a reader never opens half a report)."""
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.writing")
    temporary.write_text(page, encoding="utf-8")
    os.replace(temporary, target)
    return target


# --- rendering ----------------------------------------------------------------------------------


def render(data: ReportData, database: str) -> str:
    from plotly.offline import get_plotlyjs  # type: ignore[import-untyped]

    run = data.last_run
    run_text = (f"last run {run['run_id']} ({run['kind']}, {run['status']}) started {_when(run['started_at'])}"
                if run else "no run yet")
    sections = [_todo_section(data), _changes_section(data), _value_section(data), _recalls_section(data),
                _title_section(data), _freshness_section(data), _units_section(data)]
    return PAGE.format(
        csp=CSP, css=CSS, plotlyjs=get_plotlyjs(), plot=PLOT, sorter=SORTER, title="Fleet report",
        subtitle=_e(f"{database} · generated {_when(data.generated_at)} · {run_text}"),
        cards=_cards(data), sections="\n".join(sections),
    )


def _cards(data: ReportData) -> str:
    """The headline: what holds now (a theft recovered is not a stolen vehicle, a released lien no lien)."""
    h = data.headline
    to_park_note = f" (+{h['likely_to_park']} likely, by model)" if h["likely_to_park"] else ""
    stolen_note = f"; {_count(h['stolen_undecided'])} cannot tell" if h["stolen_undecided"] else ""
    lien_note = f"; {_count(h['lien_undecided'])} cannot tell" if h["lien_undecided"] else ""
    conflicts = data.mileage_conflicts.height
    return "".join([
        _card("Vehicles", "vehicle-count", h["vehicles"], _count(h["vehicles"]), "on the roster"),
        _card("Fleet value today", "total-value", h["total_retail"], _money(h["total_retail"]),
              f"retail, {_count(h['valued_vehicles'])} vehicles valued; trade-in {_money(h['total_trade_in'])}"),
        _card("Open recalls now", "open-recalls", h["open_recalls"], _count(h["open_recalls"]),
              f"on {_count(h['vehicles_with_open_recalls'])} vehicles" + _checked(h, "recalls_checked")),
        _card("To park now", "vehicles-to-park", h["vehicles_to_park"], _count(h["vehicles_to_park"]),
              "vehicles an open recall says to park, or park outside" + to_park_note, alert=bool(h["vehicles_to_park"])),
        _card("Stolen, not recovered", "stolen-now", h["stolen_vehicles"], _count(h["stolen_vehicles"]),
              f"vehicles now; {_count(h['theft_vehicles'])} with any theft record{stolen_note}"
              + _checked(h, "lien_theft_checked"),
              alert=bool(h["stolen_vehicles"])),
        _card("Active liens", "active-liens", h["active_lien_vehicles"], _count(h["active_lien_vehicles"]),
              f"vehicles with a lien not released; {_count(h['lien_vehicles'])} with any lien record{lien_note}"
              + _checked(h, "lien_theft_checked")),
        _card("Branded titles", "title-branded", h["title_branded_vehicles"], _count(h["title_branded_vehicles"]),
              "vehicles whose title carries a brand now" + _checked(h, "history_checked")),
        _card("Mileage conflicts", "mileage-conflicts", conflicts, _count(conflicts),
              "vehicles whose fleet-file mileage is below their latest history odometer"),
    ])


def _checked(headline: dict[str, Any], key: str) -> str:
    """How many vehicles a headline figure covers, when not all: unknown is not zero (– when none was asked)."""
    checked, vehicles = headline.get(key), headline["vehicles"]
    return "" if checked is None or checked == vehicles else f" (of {_count(checked)} checked)"


def _todo_section(data: ReportData) -> str:
    todo = data.todo
    title = f"What needs doing ({_count(todo.height)})"
    if not todo.height:
        return _section("todo", title, _empty("Nothing to do: no vehicle to park, stolen, under an active lien, newly "
                                             "branded or with a mileage conflict."))
    counts = todo.group_by("category", maintain_order=True).len()
    summary = ", ".join(f"{_count(n)} {c}" for c, n in counts.iter_rows())
    rows = [[r["category"], r["unit_number"], r["vin"], r["fleet"], _ymm(r), r["reason"], r["since"]]
            for r in todo.head(ROWS_SHOWN).iter_rows(named=True)]
    note = (f"{_e(summary)}. One row per vehicle and reason, most urgent first; the same list is written beside this "
            "page as CSV for spreadsheets (<code>todo.csv</code> beside <code>report.html</code>). Title brands are "
            "those new in the last "
            f"{NEW_BRAND_DAYS} days; park now counts campaigns confirmed for the VIN.")
    return _section("todo", title, f"<p class=note>{note}</p>" + _table(
        "table-todo", ["to do", "unit", "VIN", "fleet/depot", "vehicle", "reason", "since"], rows, cap=todo.height))


def _changes_section(data: ReportData) -> str:
    title = "What changed since the last run"
    run, changes = data.changes_run, data.changes
    if run is None:
        return _section("changes", title, _empty("No finished refresh yet."))
    total = int(changes["total"][0]) if changes.height else 0
    said = (_e(f"Run {run['run_id']} ({run['kind']}, {run['status']}, finished {_when(run['finished_at'])}): "
               f"{_count(total)} changes on {_count(changes['vin'].n_unique())} vehicles, each compared with the "
               "vehicle's previous answer (a vehicle's first answer is no change).")
            + " The table <code>changes</code> holds every run's.")
    if not total:
        return _section("changes", title, f"<p class=note>{said}</p>" + _empty("Nothing changed in this run."))
    rows = [[_SEVERITY.get(r["severity"], r["severity"]), r["unit_number"], r["vin"], r["fleet"], _ymm(r),
             _KIND.get(r["kind"], r["kind"]), _change_detail(r)] for r in changes.iter_rows(named=True)]
    return _section("changes", title, f"<p class=note>{said}</p>" + _table(
        "table-changes", ["severity", "unit", "VIN", "fleet/depot", "vehicle", "change", "detail"], rows, cap=total))


_SEVERITY = {"park_now": "park now", "park_outside": "park outside", "high": "high", "info": "info"}
_KIND = {"new_recall": "new recall", "closed_recall": "recall closed", "value_move": "value moved",
         "new_title_brand": "new title brand", "cleared_title_brand": "title brand cleared",
         "odometer_rollback": "odometer rollback", "new_lien": "new lien", "released_lien": "lien released",
         "new_theft": "theft reported", "recovered_theft": "theft recovered", "decode_changed": "decode changed",
         "new_lien_theft_event": "new lien/theft event", "revaluation": "valued at another mileage"}


def _change_detail(row: dict[str, Any]) -> str:
    """One line on what moved: the subject, and for values and odometers the figures before and after."""
    before = json.loads(row["before"]) if row["before"] else {}
    after = json.loads(row["after"]) if row["after"] else {}
    if row["kind"] == "value_move" and before.get("retail") and after.get("retail"):
        pct = (after["retail"] / before["retail"] - 1) * 100
        return f"retail {_money(before['retail'])} → {_money(after['retail'])} ({pct:+.1f}%)"
    if row["kind"] == "revaluation" and before.get("retail") and after.get("retail"):  # asked otherwise: both requests
        return " → ".join(f"{_money(a['retail'])} at {_asked(a)}" for a in (before, after))
    if row["kind"] == "odometer_rollback" and before and after:
        return (f"{_count(after.get('odometer'))} on {after.get('date')}, below {_count(before.get('odometer'))} "
                f"on {before.get('date')}")
    if row["kind"] == "decode_changed":
        changed = [f"{k} {before.get(k)} → {after.get(k)}" for k in after if before.get(k) != after.get(k)]
        return "; ".join(changed) or "decode changed"
    if row["kind"] in ("new_recall", "closed_recall"):
        component = (after or before).get("component")
        return f"{row['subject']} {component}" if component else str(row["subject"])
    return str(row["subject"])


def _asked(request: dict[str, Any]) -> str:
    """A valuation's mileage as asked: 90,000 mi (history)."""
    if request.get("mileage") is None:
        return "no mileage"
    source = {"history": " (history)", "fleet_file": " (fleet file)"}.get(request.get("mileage_source") or "", "")
    return f"{_count(request['mileage'])} {request.get('mileage_unit') or ''}".rstrip() + source


def _value_section(data: ReportData) -> str:
    by_month, today = data.value_by_month, data.value_today
    if not by_month.height:
        return _section("value", "Fleet value", _empty("No valuation yet: a refresh with market values fills this in."))
    charts = [
        _chart("chart-value-by-depot", *_stacked_by_month(by_month, "fleet", "total_trade_in", money=True),
               "Trade-in value by month and fleet/depot"),
        _chart("chart-value-by-make", *_stacked_by_month(_top(by_month, "make", "total_trade_in"), "make",
                                                         "total_trade_in", money=True), "Trade-in value by month and make"),
    ]
    tables = [
        _table("table-value-by-depot", ["fleet/depot", "vehicles", "valued", "retail", "trade-in"],
               _today_by(today, "fleet"), money={3, 4}),
        _table("table-value-by-make", ["make", "vehicles", "valued", "retail", "trade-in"],
               _today_by(today, "make"), money={3, 4}),
    ]
    note = ("Each month counts every vehicle at its latest valuation made by then (view "
            "<code>fleet_value_by_month</code>); the last month is today's value. The trend is in trade-in value: "
            "each valuation carries six months of trade-in history, so the trend has six months from the first "
            "run, while the service sends no past retail value.")
    return _section("value", "Fleet value", f"<p class=note>{note}</p>" + _grid(charts) + _grid(tables))


def _recalls_section(data: ReportData) -> str:
    h, comp, park = data.headline, data.recalls_by_component, data.vehicles_to_park
    if not h["open_recalls"] and not comp.height:
        return _section("recalls", "Open recalls", _empty("No open recall on the fleet's last checks."))
    listed = h["listed_open_recalls"]
    body = ""
    if comp.height:
        components = comp["component"].to_list()
        other = [max(0, v - p) for v, p in zip(comp["vehicles"], (comp["park_it"] + comp["park_outside"]).to_list())]
        traces = [_bar(name, components, values, color, horizontal=True) for name, values, color in (
            ("park it", comp["park_it"].to_list(), "#c0392b"), ("park outside", comp["park_outside"].to_list(), "#e67e22"),
            ("other", other, "#2c7fb8"))]
        layout = {"barmode": "stack", "yaxis": {"autorange": "reversed"}}
        body += _grid([_chart("chart-recalls-by-component", traces, layout, "Vehicles with open recalls, by component",
                              rows=comp.height),
                       _table("table-recalls-by-component", ["component", "campaigns", "vehicles", "likely (model)",
                                                             "park it", "park outside"], comp.rows())])
    if h["open_recalls"] is not None and listed < h["open_recalls"]:
        body += (f"<p class=note>{_count(h['open_recalls'] - listed)} open recalls are counted by the batch check but "
                 "their campaigns are not listed yet (the next refresh asks for them).</p>")
    title = f"Vehicles to park ({_count(h['vehicles_to_park'])})"
    if park.height:
        rows = [[r["unit_number"], r["vin"], r["fleet"], _ymm(r), r["nhtsa_campaign_number"], r["component"],
                 r["instruction"], r["matched_by"], r["days_open"]] for r in park.iter_rows(named=True)]
        body += f"<h3>{_e(title)}</h3>" + _table(
            "table-vehicles-to-park", ["unit", "VIN", "fleet/depot", "vehicle", "campaign", "component", "instruction",
                                       "matched by", "days open"], rows, cap=park.height)
    else:
        body += f"<h3>{_e(title)}</h3>" + _empty("No open recall tells to park a vehicle.")
    return _section("recalls", "Open recalls", body)


def _title_section(data: ReportData) -> str:
    """Title brands, theft and liens as they stand now; past thefts and liens only in the table."""
    title = "Title brands, theft and liens now"
    brands, states, flagged = data.title_brands, data.lien_theft, data.flagged_vehicles
    if not brands.height and not states.height:
        return _section("title", title, _empty("No title brand, lien or theft record."))
    now = states.filter(pl.col("current"))
    traces = [_bar("title brand", brands["brand"].to_list(), brands["vehicles"].to_list(), "#8e44ad", horizontal=True),
              _bar("theft / lien now", now["state"].to_list(), now["vehicles"].to_list(), "#c0392b", horizontal=True)]
    layout = {"yaxis": {"autorange": "reversed", "type": "category"}, "xaxis": {"title": {"text": "vehicles"}}}
    tables = _table("table-title-brands", ["title brand", "vehicles"], brands.rows()) + _table(
        "table-lien-theft", ["theft / lien", "now", "vehicles"], states.rows())
    rows = [[r["unit_number"], r["vin"], r["fleet"], _ymm(r), r["title_brands"], r["active_liens"], r["lienholders"],
             r["stolen_not_recovered"], r["lien_theft_events"]] for r in flagged.iter_rows(named=True)]
    listing = (f"<h3>Vehicles with a branded title, an active lien or stolen now ({_count(data.flagged_count)})</h3>"
               + _table("table-flagged-vehicles", ["unit", "VIN", "fleet/depot", "vehicle", "title brands", "active liens",
                                                   "lienholders", "stolen now", "lien/theft events ever"],
                        rows, cap=data.flagged_count))
    chart = _chart("chart-title-lien-theft", traces, layout, "Vehicles per title brand, theft and lien state now",
                   rows=brands.height + now.height)
    return _section("title", title, _grid([chart, f"<div>{tables}</div>"]) + listing)


def _freshness_section(data: ReportData) -> str:
    f = data.freshness
    if not f["roster"].max():
        return _section("freshness", "How fresh each dataset is", _empty("No vehicle on the roster yet."))
    datasets = f["dataset"].to_list()
    traces = [_bar(name, datasets, f[column].to_list(), color, horizontal=True)
              for name, column, color in (("fresh", "fresh", "#27ae60"), ("stale", "stale", "#f39c12"),
                                          ("no answer yet", "never_answered", "#95a5a6"))]
    layout = {"barmode": "stack", "yaxis": {"autorange": "reversed"}}
    rows = [[r["dataset"], _days(r["window_hours"]), r["fresh"], r["stale"], r["never_answered"], r["no_data"], r["failed"],
             r["oldest_answer"], r["newest_answer"]] for r in f.iter_rows(named=True)]
    note = ("Fresh: answered within the dataset's default freshness window; stale: the next refresh asks again; "
            "no answer yet includes vehicles outside a dataset's markets, never asked.")
    return _section("freshness", "How fresh each dataset is", f"<p class=note>{note}</p>" + "".join([
        _chart("chart-freshness", traces, layout, "Vehicles per dataset", rows=len(datasets)),
        _table("table-freshness", ["dataset", "window", "fresh", "stale", "no answer yet", "of which no data", "failed",
                                   "oldest answer", "newest answer"], rows)]))


def _units_section(data: ReportData) -> str:
    u = data.units_by_month
    if not u.height:
        return _section("units", "Units spent per month", _empty("No call made yet."))
    chart = _chart("chart-units-by-month", *_stacked_by_month(u, "endpoint", "units"), "Units per month and endpoint")
    totals = u.group_by("month").agg(pl.col("calls").sum(), pl.col("units").sum(), pl.col("failed_calls").sum(),
                                     pl.col("no_data_calls").sum()).sort("month", descending=True)
    rows = [[_month(r["month"]), r["calls"], r["units"], r["failed_calls"], r["no_data_calls"]] for r in totals.iter_rows(named=True)]
    detail = [[_month(r["month"]), r["endpoint"], r["calls"], r["units"], r["failed_calls"], r["no_data_calls"]]
              for r in u.sort(["month", "units"], descending=True).iter_rows(named=True)]
    return _section("units", "Units spent per month", _grid([chart, _table(
        "table-units-by-month", ["month", "calls", "units", "failed calls", "no data (404)"], rows)]) + _table(
        "table-units-by-endpoint", ["month", "endpoint", "calls", "units", "failed calls", "no data (404)"], detail))


# --- pieces -------------------------------------------------------------------------------------


def _stacked_by_month(frame: pl.DataFrame, by: str, value: str, money: bool = False) -> tuple[list[dict], dict]:
    """Bars per month, stacked by `by` (largest first, 'Other' last)."""
    months = sorted({_month(m) for m in frame["month"]})
    totals = (frame.with_columns(pl.col("month").map_elements(_month, return_dtype=pl.String))
              .group_by([by, "month"]).agg(pl.col(value).sum()))
    order = totals.group_by(by).agg(pl.col(value).sum()).sort(value, descending=True)[by].to_list()
    if "Other" in order:
        order = [o for o in order if o != "Other"] + ["Other"]
    traces = []
    for name in order:
        part = dict(totals.filter(pl.col(by) == name).select("month", value).iter_rows())
        traces.append(_bar(name, months, [part.get(m, 0) for m in months]))
    axis = {"title": {"text": value.replace("_", " ")}, **({"tickprefix": "$", "tickformat": ",.0f"} if money else {})}
    return traces, {"barmode": "stack", "xaxis": {"type": "category"}, "yaxis": axis}


def _bar(name: str, labels: list[Any], values: list[Any], color: str | None = None, horizontal: bool = False) -> dict:
    trace: dict[str, Any] = {"type": "bar", "name": name, "x": values, "y": labels, "orientation": "h"} if horizontal \
        else {"type": "bar", "name": name, "x": labels, "y": values}
    if color:
        trace["marker"] = {"color": color}
    return trace


def _top(frame: pl.DataFrame, by: str, value: str) -> pl.DataFrame:
    """The largest `TOP_MAKES` groups by their latest month's value; the rest as 'Other'."""
    latest = frame.filter(pl.col("month") == frame["month"].max())
    keep = latest.group_by(by).agg(pl.col(value).sum()).sort(value, descending=True).head(TOP_MAKES)[by]
    return frame.with_columns(pl.when(pl.col(by).is_in(keep.implode())).then(pl.col(by)).otherwise(pl.lit("Other")).alias(by))


def _today_by(today: pl.DataFrame, by: str) -> list[tuple[Any, ...]]:
    valued = pl.col("valued").sum() > 0  # no valuation: no value, rather than $0
    return (today.group_by(by).agg(pl.col("vehicles").sum(), pl.col("valued").sum(),
                                   pl.when(valued).then(pl.col("total_retail").sum()).alias("total_retail"),
                                   pl.when(valued).then(pl.col("total_trade_in").sum()).alias("total_trade_in"))
            .sort("total_retail", by, descending=[True, False], nulls_last=True).rows())


def _chart(div_id: str, traces: list[dict], layout: dict, title: str, rows: int = 0) -> str:
    """A plotly.js chart: traces and layout as JSON, drawn by the inlined library when the page loads."""
    # The title is the page's, above the chart: it wraps on a phone, and plotly's toolbar (in the top
    # margin) cannot cover it.
    layout = {"height": max(360, 120 + 24 * rows), "font": {"family": "system-ui, sans-serif"},
              "margin": {"l": 10, "r": 10, "t": 34, "b": 10}, "legend": {"orientation": "h", "y": -0.2},
              "paper_bgcolor": "#fff", "plot_bgcolor": "#fff", **layout}
    for axis in ("xaxis", "yaxis"):
        layout[axis] = {"automargin": True, "gridcolor": "#e5e9ee", "zerolinecolor": "#cfd6dd", **layout.get(axis, {})}
    # Drawn once the page is laid out (PLOT, at the end of the body), so each chart takes its column's width.
    spec = _json({"data": traces, "layout": layout, "config": CHART_CONFIG})
    return (f'<figure class="chart-box"><figcaption>{_e(title)}</figcaption><div class="chart" id="{div_id}"></div>'
            f'<script type="application/json" class="chart-spec" data-for="{div_id}">{spec}</script></figure>')


def _json(value: Any) -> str:
    """JSON safe inside a <script> element, whatever the fleet file's names say."""
    text = json.dumps(_finite(value), default=str, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _table(table_id: str, headers: list[str], rows: list[Any], money: set[int] | None = None, cap: int | None = None) -> str:
    money = money or set()
    head = "".join(f'<th scope="col" title="sort">{_e(h)}</th>' for h in headers)
    # A phone shows each row as a card, labelled; identifiers are never broken across lines (other text may be,
    # anywhere: a depot's name can be one long word).
    labels = [f' data-label="{_e(h)}"' + (' data-keep=""' if h in KEEP_WHOLE else "") for h in headers]
    body = "".join("<tr>" + "".join(_cell(v, i in money, labels[i]) for i, v in enumerate(row)) + "</tr>" for row in rows)
    more = ""
    if cap is not None and cap > len(rows):
        more = f"<p class=note>The first {_count(len(rows))} of {_count(cap)} shown; query the database for all.</p>"
    kind = "sortable" if len(headers) <= 3 else "sortable cards-on-phone"  # a short row fits a phone as it is
    return (f'<div class="table-wrap"><table class="{kind}" id="{table_id}" data-rows="{len(rows)}">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{more}")


def _cell(value: Any, money: bool, label: str = "") -> str:
    if value is None:
        return f'<td data-sort=""{label}></td>'
    if isinstance(value, bool):
        return f"<td{label}>{'yes' if value else 'no'}</td>"
    if isinstance(value, (int, float)):
        shown = _money(value) if money else (_count(value) if isinstance(value, int) else f"{value:,.2f}")
        return f'<td class="num" data-sort="{value}"{label}>{shown}</td>'
    if isinstance(value, datetime):
        return f'<td class="when" data-sort="{value.isoformat()}"{label}>{_e(_when(value))}</td>'
    if isinstance(value, date):
        return f'<td class="when" data-sort="{value.isoformat()}"{label}>{value.isoformat()}</td>'
    return f"<td{label}>{_e(str(value))}</td>"


def _card(label: str, element_id: str, value: Any, shown: str, detail: str, alert: bool = False) -> str:
    raw = "" if value is None else str(value)
    return (f'<div class="card{" alert" if alert else ""}"><div class="label">{_e(label)}</div>'
            f'<div class="value" id="{element_id}" data-value="{_e(raw)}">{_e(shown)}</div>'
            f'<div class="detail">{_e(detail)}</div></div>')


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{_e(title)}</h2>{body}</section>'


def _grid(parts: list[str]) -> str:
    return '<div class="grid">' + "".join(parts) + "</div>"


def _empty(text: str) -> str:
    return f'<p class="empty">{_e(text)}</p>'


def _ymm(row: dict[str, Any]) -> str:
    return " ".join(str(row[k]) for k in ("year", "make", "model") if row.get(k) is not None)


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _count(value: Any) -> str:
    return "–" if value is None else f"{int(value):,}"


def _money(value: Any) -> str:
    return "–" if value is None else f"${value:,.0f}"


def _days(hours: int) -> str:
    return f"{hours // 24} days" if hours % 24 == 0 else f"{hours} h"


def _month(value: date | datetime) -> str:
    return f"{value:%Y-%m}"


def _when(value: datetime | None) -> str:
    return "" if value is None else f"{value.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
