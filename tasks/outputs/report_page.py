"""The fleet report's page, section by section in reading order, from the figures `tasks/outputs/report.py` gathers.

Safety first (cards counted from the to-do list, then its rows per category: park now open, long lists
collapsed), what changed over the report's period, data hygiene (collapsed), the fleet now, then value,
recalls, title/lien/theft, freshness and units, each chart followed by its figures as a collapsed table. The
page is one file: style, a table sorter and the charts (inline SVG, tasks/outputs/report_charts.py) inside it,
and its Content-Security-Policy forbids any request. Elements showing headline figures carry ids and
`data-value` attributes (tests read them); printed, every collapsed part opens.
"""

from __future__ import annotations

import html
import json
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

import polars as pl

from fleet_data.tasks.outputs.report_assets import CSS, PAGE, SCRIPT
from fleet_data.tasks.outputs.report_banner import service_banner
from fleet_data.tasks.outputs.report_charts import Series, bar_chart
from fleet_data.tasks.outputs.todo import NEW_BRAND_DAYS

if TYPE_CHECKING:  # the figures come from tasks/outputs/report.py, which calls `render`
    from fleet_data.tasks.outputs.report import ReportData

TOP_MAKES = 8  # the value-by-make chart shows the largest makes, the rest as "Other"
OPEN_UP_TO = 10  # a to-do category with this many rows or fewer is shown open (park now always is)
KEEP_WHOLE = {"VIN", "unit", "campaign", "severity", "recorded", "row"}  # columns never broken across lines
# No request of any kind may leave the page: scripts and styles are inline, images data: URLs.
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:"
# The to-do list's categories, most urgent first: (category in report_todo, card id, card label, what it means).
SAFETY = (
    ("park now", "park-now", "Park now", "vehicles an open recall says not to drive"),
    ("park outside", "park-outside", "Park outside", "vehicles to park away from buildings: a fire risk"),
    ("stolen", "stolen-now", "Stolen, not recovered", "vehicles stolen and not recovered now"),
    ("active lien", "active-liens", "Active liens", "vehicles with a lien not released"),
    ("title brand", "new-title-brands", "New title brands", f"vehicles whose title got a brand in the last {NEW_BRAND_DAYS} days"),
)
# The headline figure that is NULL when no vehicle was asked for a card's dataset (sql/queries/report_headline.sql).
NEVER_ASKED = "; no vehicle was checked for it yet"  # a card whose figure is unknown (KNOWN_BY): why it shows "–"
KNOWN_BY = {"park-now": "vehicles_to_park", "park-outside": "vehicles_to_park", "stolen-now": "stolen_vehicles",
            "active-liens": "active_lien_vehicles", "new-title-brands": "title_branded_vehicles"}


class Page:
    """The parts of the page that need more than their own HTML: each table's phone labels, as style rules."""

    def __init__(self) -> None:
        self.labels: list[str] = []  # on a phone, each cell's column name before its value
        self.whole: list[str] = []  # columns never broken across lines

    def style(self) -> str:
        return "\n".join(self.whole) + "\n@media (max-width:640px){" + "".join(self.labels) + "}"

    def table(self, table_id: str, headers: list[str], rows: list[Any], money: set[int] | None = None,
              cap: int | None = None) -> str:
        money = money or set()
        head = "".join(f'<th scope="col" title="sort">{_e(h)}</th>' for h in headers)
        body = "".join("<tr>" + "".join(_cell(v, i in money) for i, v in enumerate(row)) + "</tr>" for row in rows)
        more = ""
        if cap is not None and cap > len(rows):
            more = f"<p class=note>The first {_count(len(rows))} of {_count(cap)} shown; query the database for all.</p>"
        kind = "sortable" if len(headers) <= 3 else "sortable cards-on-phone"  # a short row fits a phone as it is
        # On a phone each row is a card of labelled values: the labels are written once, here, not in every cell.
        if len(headers) > 3:
            self.labels += [f"#{table_id} td:nth-child({i + 1})::before{{content:{json.dumps(h)}}}"
                            for i, h in enumerate(headers)]
        self.whole += [f"#{table_id} td:nth-child({i + 1}){{white-space:nowrap}}" for i, h in enumerate(headers)
                       if h in KEEP_WHOLE]
        return (f'<div class="table-wrap"><table class="{kind}" id="{table_id}" data-rows="{len(rows)}">'
                f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{more}")


def render(data: ReportData, database: str) -> str:
    run = data.last_run
    run_text = (f"last run {run['run_id']} ({run['kind']}, {run['status']}) started {_when(run['started_at'])}"
                if run else "no run yet")
    page = Page()
    sections = [_safety_section(data, page), _changes_section(data, page), _hygiene_section(data, page),
                _fleet_section(data), _value_section(data, page), _recalls_section(data, page),
                _title_section(data, page), _freshness_section(data, page), _units_section(data, page)]
    return PAGE.format(
        csp=CSP, css=CSS + page.style(), script=SCRIPT, title="Fleet report", banner=banner(data),
        subtitle=_e(f"{database} · generated {_when(data.generated_at)} · {run_text}"), sections="\n".join(sections),
    )


def banner(data: ReportData) -> str:
    """A line above everything else, for what the reader must know before any figure: which service answered
    (report_banner.py). The page template puts it between the header and the safety section."""
    return service_banner(data.services)


# --- sections -----------------------------------------------------------------------------------


def _safety_section(data: ReportData, page: Page) -> str:
    """The to-do list: a card per category, counted from the list itself, then its rows per category."""
    todo, h = data.todo, data.headline
    counts = dict(todo.group_by("category").len().iter_rows())
    likely = f" (+{_count(h['likely_to_park'])} likely, by model)" if h["likely_to_park"] else ""
    stolen = f"; {_count(h['theft_vehicles'])} with any theft record" + (
        f", {_count(h['stolen_undecided'])} cannot tell" if h["stolen_undecided"] else "")
    liens = f"; {_count(h['lien_vehicles'])} with any lien record" + (
        f", {_count(h['lien_undecided'])} cannot tell" if h["lien_undecided"] else "")
    extra = {"park-now": likely, "stolen-now": stolen + _checked(h, "lien_theft_checked"),
             "active-liens": liens + _checked(h, "lien_theft_checked")}
    # Unknown is not zero: a category whose dataset no vehicle was asked for shows "–" (the headline's NULL).
    unknown = {card_id for card_id, figure in KNOWN_BY.items() if h.get(figure) is None}
    # Nor are its detail's counts: "0 with any theft record" of a fleet never checked would read as a clean bill.
    cards = "".join(_card(label, card_id, None if card_id in unknown else counts.get(category, 0),
                          meaning + (NEVER_ASKED if card_id in unknown else extra.get(card_id, "")),
                          alert=bool(counts.get(category)))
                    for category, card_id, label, meaning in SAFETY)
    title = f"Safety first: what needs doing now ({_count(todo.height)})"
    if not todo.height:
        return _section("todo", title, f'<div class="cards">{cards}</div>' + _empty(
            "Nothing to do: no vehicle to park, stolen, under an active lien or newly branded."))
    lists = []
    for category, card_id, label, _ in SAFETY:
        rows = todo.filter(pl.col("category") == category)
        if rows.height:
            table = page.table(f"table-todo-{card_id}", ["unit", "VIN", "fleet/depot", "vehicle", "reason", "since"],
                               [[r["unit_number"], r["vin"], r["fleet"], _ymm(r), r["reason"], r["since"]]
                                for r in rows.head(500).iter_rows(named=True)], cap=rows.height)
            lists.append(_details(f"todo-{card_id}", f"{label} ({_count(rows.height)})", table,
                                  opened=category == "park now" or rows.height <= OPEN_UP_TO))
    note = ("One row per vehicle and reason, the oldest first; the counts above are these rows. Park now counts "
            "campaigns confirmed for the VIN. The list is also beside this page as CSV for spreadsheets "
            "(<code>todo.csv</code> beside <code>report.html</code>), followed there by the data hygiene rows.")
    return _section("todo", title, f'<div class="cards">{cards}</div>' + "".join(lists) + f"<p class=note>{note}</p>")


def _changes_section(data: ReportData, page: Page) -> str:
    window, changes = data.window, data.changes
    title = f"What changed {window.said}"
    if data.last_run is None:
        return _section("changes", title, _empty("No finished refresh yet."))
    total = int(changes["total"][0]) if changes.height else 0
    vehicles = int(changes["vehicles"][0]) if changes.height else 0
    new = f"; those recorded after the previous report ({_when(window.previous)}) are marked new" if window.previous else ""
    said = (_e(f"{_count(total)} changes on {_count(vehicles)} vehicles recorded since {_when(window.since)}, each "
               f"compared with the vehicle's previous answer (a first answer is no change){new}.")
            + " <code>fleet report --since DATE|RUN_ID</code> covers another period; the table macro "
            "<code>changes_since(...)</code> gives every change since a moment.")
    if not total:
        return _section("changes", title, f"<p class=note>{said}</p>" + _empty("Nothing changed in this period."))
    rows = [[_SEVERITY.get(r["severity"], r["severity"]), r["unit_number"], r["vin"], r["fleet"], _ymm(r),
             _KIND.get(r["kind"], r["kind"]), _change_detail(r), _recorded(r["detected_at"], window.previous)]
            for r in changes.iter_rows(named=True)]
    headers = ["severity", "unit", "VIN", "fleet/depot", "vehicle", "change", "detail", "recorded"]
    urgent, other = [r for r in rows if r[0] != "info"], [r for r in rows if r[0] == "info"]
    body = page.table("table-changes", headers, urgent) if urgent else _empty("Nothing to park, and nothing of high "
                                                                                "severity.")
    if other:
        body += _details("changes-info", f"Other changes ({_count(len(other))}): values, decodes, released liens…",
                         page.table("table-changes-info", headers, other), opened=not urgent and len(other) <= OPEN_UP_TO)
    if total > len(rows):
        body += f"<p class=note>The first {_count(len(rows))} of {_count(total)} shown; query the database for all.</p>"
    return _section("changes", title, f"<p class=note>{said}</p>" + body)


def _hygiene_section(data: ReportData, page: Page) -> str:
    """Data hygiene, collapsed: the fleet file's mileage below the vehicle's history, rows the file could not give."""
    conflicts, rejected = data.mileage_conflicts, data.rejected_rows
    rejected_total = int(rejected["total"][0]) if rejected.height else 0
    summary = (f'<h2>Data hygiene: <span id="mileage-conflicts" data-value="{conflicts.height}">'
               f"{_count(conflicts.height)}</span> mileage conflicts, "
               f'<span id="rejected-rows" data-value="{rejected_total}">{_count(rejected_total)}</span> '
               "fleet-file rows rejected</h2>")
    parts = []
    if conflicts.height:
        rows = [[r["unit_number"], r["vin"], r["fleet"], _ymm(r), f"{r['fleet_mileage']:,} {r['fleet_mileage_unit']}",
                 f"{r['history_odometer']:,} {r['history_unit']}", r["history_date"], r["miles_below"]]
                for r in conflicts.head(500).iter_rows(named=True)]
        parts.append("<h3>Mileage conflicts</h3><p class=note>The fleet file's mileage is below the vehicle's latest "
                     "history odometer reading (view <code>mileage_conflicts</code>): the file is out of date or wrong. "
                     "Valuations use the reading; correct the file.</p>" + page.table(
                         "table-mileage-conflicts", ["unit", "VIN", "fleet/depot", "vehicle", "fleet file", "history read",
                                                     "on", "miles below"], rows, cap=conflicts.height))
    if rejected_total:
        rows = [[r["source_file"], r["source_row"], r["raw_value"], r["reason"]] for r in rejected.iter_rows(named=True)]
        parts.append("<h3>Fleet-file rows rejected by the latest refresh</h3><p class=note>Rows whose VIN (or plate) "
                     "could not be used (table <code>rejected_rows</code>); row 1 is the first under the header.</p>"
                     + page.table("table-rejected-rows", ["file", "row", "VIN cell", "reason"], rows, cap=rejected_total))
    body = "".join(parts) or _empty("Nothing to correct: no mileage conflict, no rejected row.")
    return f'<section id="hygiene"><details class="section"><summary>{summary}</summary>{body}</details></section>'


def _fleet_section(data: ReportData) -> str:
    """The fleet as it stands now: vehicles, value, open recalls, branded titles."""
    h = data.headline
    cards = "".join([
        _card("Vehicles", "vehicle-count", h["vehicles"], "on the roster"),
        _card("Fleet value today", "total-value", h["total_retail"],
              f"retail, {_count(h['valued_vehicles'])} vehicles valued; trade-in {_money(h['total_trade_in'])}",
              shown=_money(h["total_retail"])),
        _card("Open recalls now", "open-recalls", h["open_recalls"],
              f"on {_count(h['vehicles_with_open_recalls'])} vehicles" + _checked(h, "recalls_checked")),
        _card("Branded titles", "title-branded", h["title_branded_vehicles"],
              "vehicles whose title carries a brand now" + _checked(h, "history_checked")),
    ])
    return _section("fleet", "The fleet now", f'<div class="cards">{cards}</div>')


def _checked(headline: dict[str, Any], key: str) -> str:
    """How many vehicles a headline figure covers, when not all: unknown is not zero (– when none was asked)."""
    checked, vehicles = headline.get(key), headline["vehicles"]
    return "" if checked is None or checked == vehicles else f" (of {_count(checked)} checked)"


def _value_section(data: ReportData, page: Page) -> str:
    by_month, today = data.value_by_month, data.value_today
    if not by_month.height:
        return _section("value", "Fleet value", _empty("No valuation yet: a refresh with market values fills this in."))
    charts = [
        _stacked_by_month("chart-value-by-depot", "Trade-in value by month and fleet/depot", by_month, "fleet",
                          "total_trade_in", _money),
        _stacked_by_month("chart-value-by-make", "Trade-in value by month and make", _top(by_month, "make", "total_trade_in"),
                          "make", "total_trade_in", _money),
    ]
    tables = (page.table("table-value-by-depot", ["fleet/depot", "vehicles", "valued", "retail", "trade-in"],
                         _today_by(today, "fleet"), money={3, 4})
              + page.table("table-value-by-make", ["make", "vehicles", "valued", "retail", "trade-in"],
                           _today_by(today, "make"), money={3, 4}))
    note = ("Each month counts every vehicle at its latest valuation made by then (view "
            "<code>fleet_value_by_month</code>); the last month is today's value. The trend is in trade-in value: "
            "each valuation carries six months of trade-in history, so the trend has six months from the first "
            "run, while the service sends no past retail value.")
    return _section("value", "Fleet value", f"<p class=note>{note}</p>" + _grid(charts)
                    + _details("value-today", "Today's value by fleet/depot and by make", tables))


def _recalls_section(data: ReportData, page: Page) -> str:
    h, comp, park = data.headline, data.recalls_by_component, data.vehicles_to_park
    if not h["open_recalls"] and not comp.height:
        return _section("recalls", "Open recalls", _empty("No open recall on the fleet's last checks."))
    body = ""
    if comp.height:
        other = [max(0, v - p) for v, p in zip(comp["vehicles"], (comp["park_it"] + comp["park_outside"]).to_list())]
        body += bar_chart("chart-recalls-by-component", "Vehicles with open recalls, by component", comp["component"].to_list(), [
            Series("park it", comp["park_it"].to_list(), "#c0392b"),
            Series("park outside", comp["park_outside"].to_list(), "#e67e22"), Series("other", other, "#2c7fb8")])
        body += _details("recalls-by-component", "The figures by component", page.table(
            "table-recalls-by-component", ["component", "campaigns", "vehicles", "likely (model)", "park it",
                                           "park outside"], comp.rows()))
    body += _unlisted_note(data.unlisted_recalls)
    to_park = sum(1 for c in data.todo["category"] if c in ("park now", "park outside"))
    title = f"Vehicles to park: {_count(to_park)} (one row per vehicle and campaign)"
    if park.height:
        rows = [[r["unit_number"], r["vin"], r["fleet"], _ymm(r), r["nhtsa_campaign_number"], r["component"],
                 r["instruction"], r["matched_by"], r["days_open"]] for r in park.iter_rows(named=True)]
        body += _details("vehicles-to-park", title, page.table(
            "table-vehicles-to-park", ["unit", "VIN", "fleet/depot", "vehicle", "campaign", "component", "instruction",
                                       "matched by", "days open"], rows, cap=park.height))
    else:
        body += f"<h3>{_e(title)}</h3>" + _empty("No open recall tells to park a vehicle.")
    return _section("recalls", "Open recalls", body)


def _unlisted_note(unlisted: dict[str, Any]) -> str:
    """Open recalls counted beyond the campaigns listed for the VIN, said as they are (never a promise)."""
    notes = []
    if unlisted["unlisted"]:
        notes.append(f"{_count(unlisted['unlisted'])} open recalls on {_vehicles(unlisted['unlisted_vehicles'])} are "
                     "counted by their latest batch check, but their campaigns are not listed (their lookup failed or "
                     "has not been made): they are in the count above, not in the chart or the to-do list.")
    if unlisted["by_model"]:
        notes.append(f"{_count(unlisted['by_model'])} open recalls on {_vehicles(unlisted['by_model_vehicles'])} are "
                     "listed for their models only (<code>--recall-details model</code>): likely, not confirmed for "
                     "the VIN; counted as likely above.")
    return "".join(f"<p class=note>{n}</p>" for n in notes)


def _vehicles(n: int) -> str:
    return f"{_count(n)} vehicle" + ("" if n == 1 else "s")


def _title_section(data: ReportData, page: Page) -> str:
    """Title brands, theft and liens as they stand now; past thefts and liens only in the table."""
    title = "Title brands, theft and liens now"
    brands, states, flagged = data.title_brands, data.lien_theft, data.flagged_vehicles
    if not brands.height and not states.height:
        return _section("title", title, _empty("No title brand, lien or theft record."))
    now = states.filter(pl.col("current"))
    labels = brands["brand"].to_list() + now["state"].to_list()
    chart = bar_chart("chart-title-lien-theft", "Vehicles per title brand, theft and lien state now", labels, [
        Series("title brand", brands["vehicles"].to_list() + [0] * now.height, "#8e44ad"),
        Series("theft / lien now", [0] * brands.height + now["vehicles"].to_list(), "#c0392b")])
    tables = page.table("table-title-brands", ["title brand", "vehicles"], brands.rows()) + page.table(
        "table-lien-theft", ["theft / lien", "now", "vehicles"], states.rows())
    rows = [[r["unit_number"], r["vin"], r["fleet"], _ymm(r), r["title_brands"], r["active_liens"], r["lienholders"],
             r["stolen_not_recovered"], r["lien_theft_events"]] for r in flagged.iter_rows(named=True)]
    listing = _details("flagged-vehicles", f"Vehicles with a branded title, an active lien or stolen now "
                       f"({_count(data.flagged_count)})", page.table(
                           "table-flagged-vehicles", ["unit", "VIN", "fleet/depot", "vehicle", "title brands",
                                                      "active liens", "lienholders", "stolen now",
                                                      "lien/theft events ever"], rows, cap=data.flagged_count))
    return _section("title", title, _grid([chart, f"<div>{tables}</div>"]) + listing)


def _freshness_section(data: ReportData, page: Page) -> str:
    f = data.freshness
    if not f["roster"].max():
        return _section("freshness", "How fresh each dataset is", _empty("No vehicle on the roster yet."))
    chart = bar_chart("chart-freshness", "Vehicles per dataset", f["dataset"].to_list(), [
        Series("fresh", f["fresh"].to_list(), "#27ae60"), Series("stale", f["stale"].to_list(), "#f39c12"),
        Series("no answer yet", f["never_answered"].to_list(), "#95a5a6")])
    rows = [[r["dataset"], _days(r["window_hours"]), r["fresh"], r["stale"], r["never_answered"], r["no_data"], r["failed"],
             r["oldest_answer"], r["newest_answer"]] for r in f.iter_rows(named=True)]
    note = ("Fresh: answered within the dataset's default freshness window; stale: the next refresh asks again; "
            "no answer yet includes vehicles outside a dataset's markets, never asked.")
    table = page.table("table-freshness", ["dataset", "window", "fresh", "stale", "no answer yet", "of which no data",
                                           "failed", "oldest answer", "newest answer"], rows)
    return _section("freshness", "How fresh each dataset is", f"<p class=note>{note}</p>" + chart
                    + _details("freshness-figures", "The figures per dataset", table))


def _units_section(data: ReportData, page: Page) -> str:
    u = data.units_by_month
    if not u.height:
        return _section("units", "Units spent per month", _empty("No call made yet."))
    chart = _stacked_by_month("chart-units-by-month", "Units per month and endpoint", u, "endpoint", "units", _count)
    totals = u.group_by("month").agg(pl.col("calls").sum(), pl.col("units").sum(), pl.col("failed_calls").sum(),
                                     pl.col("no_data_calls").sum()).sort("month", descending=True)
    rows = [[_month(r["month"]), r["calls"], r["units"], r["failed_calls"], r["no_data_calls"]] for r in totals.iter_rows(named=True)]
    detail = [[_month(r["month"]), r["endpoint"], r["calls"], r["units"], r["failed_calls"], r["no_data_calls"]]
              for r in u.sort(["month", "units"], descending=True).iter_rows(named=True)]
    return _section("units", "Units spent per month", _grid([chart, page.table(
        "table-units-by-month", ["month", "calls", "units", "failed calls", "no data (404)"], rows)]) + _details(
        "units-by-endpoint", "Per endpoint", page.table(
            "table-units-by-endpoint", ["month", "endpoint", "calls", "units", "failed calls", "no data (404)"], detail)))


# --- pieces -------------------------------------------------------------------------------------

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


def _recorded(detected: datetime, previous: datetime | None) -> str:
    """The day a change was recorded, and whether it is new since the previous report."""
    return f"{detected.astimezone(UTC):%Y-%m-%d}" + (" new" if previous is not None and detected > previous else "")


def _stacked_by_month(chart_id: str, title: str, frame: pl.DataFrame, by: str, value: str, shown: Any) -> str:
    """A bar per month, stacked by `by` (largest first, 'Other' last)."""
    months = sorted({_month(m) for m in frame["month"]})
    totals = (frame.with_columns(pl.col("month").map_elements(_month, return_dtype=pl.String))
              .group_by([by, "month"]).agg(pl.col(value).sum()))
    order = totals.group_by(by).agg(pl.col(value).sum()).sort([value, by], descending=[True, False])[by].to_list()
    if "Other" in order:
        order = [o for o in order if o != "Other"] + ["Other"]
    series = []
    for name in order:
        part = dict(totals.filter(pl.col(by) == name).select("month", value).iter_rows())
        series.append(Series(str(name), [part.get(m, 0) for m in months]))
    return bar_chart(chart_id, title, months, series, shown)


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


def _cell(value: Any, money: bool) -> str:
    if value is None:
        return '<td data-sort=""></td>'
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, (int, float)):
        shown = _money(value) if money else (_count(value) if isinstance(value, int) else f"{value:,.2f}")
        return f'<td class="num" data-sort="{value}">{shown}</td>'
    if isinstance(value, datetime):
        return f'<td class="when" data-sort="{value.isoformat()}">{_e(_when(value))}</td>'
    if isinstance(value, date):
        return f'<td class="when">{value.isoformat()}</td>'
    return f"<td>{_e(str(value))}</td>"


def _card(label: str, element_id: str, value: Any, detail: str, alert: bool = False, shown: str | None = None) -> str:
    raw = "" if value is None else str(value)
    return (f'<div class="card{" alert" if alert else ""}"><div class="label">{_e(label)}</div>'
            f'<div class="value" id="{element_id}" data-value="{_e(raw)}">{_e(shown or _count(value))}</div>'
            f'<div class="detail">{_e(detail)}</div></div>')


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{_e(title)}</h2>{body}</section>'


def _details(anchor: str, summary: str, body: str, opened: bool = False) -> str:
    """A part shown on request (a click on its summary); printed, it opens (SCRIPT)."""
    return f'<details id="{anchor}"{" open" if opened else ""}><summary>{_e(summary)}</summary>{body}</details>'


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
