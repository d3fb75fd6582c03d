"""The fleet report: one self-contained HTML page a fleet manager opens in a browser.

`fleet report` builds it from the published database, read-only; every refresh writes it next to
the lake. Everything the page needs is inside the file (plotly.js, the data, a small table sorter),
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

from tasks.plan.due import (
    ALL_DATASETS,
    DEFAULT_DATASETS,
    DEFAULT_FRESHNESS,
    DEFAULT_NO_DATA_FRESHNESS,
)

logger = logging.getLogger(__name__)

ROWS_SHOWN = 500  # long lists are cut here (the headline counts them all); the views hold every row
TOP_MAKES = 8  # the value-by-make chart shows the largest makes, the rest as "Other"
CHART_CONFIG = {"displaylogo": False, "responsive": True}
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
        freshness=freshness,
        units_by_month=source.query("report_units_by_month"),
        generated_at=now,
    )


def build_report(source: Source, database: str, now: datetime | None = None) -> tuple[str, ReportData]:
    """The page's HTML and the figures it shows."""
    data = gather(source, now)
    return render(data, database), data


def write_run_report(source: Source, db: str, lake: str | None) -> tuple[Path | None, str | None]:
    """A run's report, written next to the lake (else beside the database): (where, None) or (None, why not).

    The run's data has landed by then: a report that cannot be written is said, never fails the run.
    """
    try:
        page, _ = build_report(source, db)
        return write_report(page, report_path(db, lake)), None
    except Exception as exc:  # noqa: BLE001 - any failure here is the report's, not the run's
        problem = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        logger.warning("the fleet report was not written: %s", problem)
        return None, problem


def report_markdown(path: Path | None, problem: str | None) -> str:
    """The line the run's Prefect artifact ends with: a link to the report, or why there is none."""
    if path is not None:
        where = path.resolve()
        return f"\n\n**Fleet report**: [{where.name}]({where.as_uri()}) (`{where}`)"
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

    h = data.headline
    run = data.last_run
    run_text = (f"last run {run['run_id']} ({run['kind']}, {run['status']}) started {_when(run['started_at'])}"
                if run else "no run yet")
    to_park_note = f" (+{h['likely_to_park']} likely, by model)" if h["likely_to_park"] else ""
    cards = "".join([
        _card("Vehicles", "vehicle-count", h["vehicles"], _count(h["vehicles"]), "on the roster"),
        _card("Fleet value today", "total-value", h["total_retail"], _money(h["total_retail"]),
              f"retail, {_count(h['valued_vehicles'])} vehicles valued; trade-in {_money(h['total_trade_in'])}"),
        _card("Open recalls", "open-recalls", h["open_recalls"], _count(h["open_recalls"]),
              f"on {_count(h['vehicles_with_open_recalls'])} vehicles"),
        _card("Vehicles to park", "vehicles-to-park", h["vehicles_to_park"], _count(h["vehicles_to_park"]),
              "an open recall says park it, or park it outside" + to_park_note, alert=bool(h["vehicles_to_park"])),
        _card("Title brands", "title-branded", h["title_branded_vehicles"], _count(h["title_branded_vehicles"]),
              "vehicles with a branded title"),
        _card("Theft records", "theft-vehicles", h["theft_vehicles"], _count(h["theft_vehicles"]), "vehicles"),
        _card("Lien records", "lien-vehicles", h["lien_vehicles"], _count(h["lien_vehicles"]), "vehicles"),
    ])
    sections = [_value_section(data), _recalls_section(data), _title_section(data), _freshness_section(data),
                _units_section(data)]
    return PAGE.format(
        csp=CSP, css=CSS, plotlyjs=get_plotlyjs(), plot=PLOT, sorter=SORTER, title="Fleet report",
        subtitle=_e(f"{database} · generated {_when(data.generated_at)} · {run_text}"),
        cards=cards, sections="\n".join(sections),
    )


def _value_section(data: ReportData) -> str:
    by_month, today = data.value_by_month, data.value_today
    if not by_month.height:
        return _section("value", "Fleet value", _empty("No valuation yet: a refresh with market values fills this in."))
    charts = [
        _chart("chart-value-by-depot", *_stacked_by_month(by_month, "fleet", "total_retail", money=True),
               "Value by month and fleet/depot"),
        _chart("chart-value-by-make", *_stacked_by_month(_top(by_month, "make", "total_retail"), "make", "total_retail",
                                                         money=True), "Value by month and make"),
    ]
    tables = [
        _table("table-value-by-depot", ["fleet/depot", "vehicles", "valued", "retail", "trade-in"],
               _today_by(today, "fleet"), money={3, 4}),
        _table("table-value-by-make", ["make", "vehicles", "valued", "retail", "trade-in"],
               _today_by(today, "make"), money={3, 4}),
    ]
    note = ("Each month counts every vehicle at its latest valuation made by then (view "
            "<code>fleet_value_by_month</code>); the last month is today's value.")
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
    if listed < h["open_recalls"]:
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
    brands, events, flagged = data.title_brands, data.lien_theft, data.flagged_vehicles
    if not brands.height and not events.height:
        return _section("title", "Title brands, theft and liens", _empty("No title brand, lien or theft record."))
    traces = [_bar("title brand", brands["brand"].to_list(), brands["vehicles"].to_list(), "#8e44ad"),
              _bar("lien / theft event", events["event"].to_list(), events["vehicles"].to_list(), "#16a085")]
    layout = {"yaxis": {"title": {"text": "vehicles"}}, "xaxis": {"type": "category"}}
    tables = _table("table-title-brands", ["title brand", "vehicles"], brands.rows()) + _table(
        "table-lien-theft", ["lien/theft event", "events", "vehicles"], events.rows())
    rows = [[r["unit_number"], r["vin"], r["fleet"], _ymm(r), r["title_brands"], r["liens"], r["lien_releases"],
             r["thefts"], r["recoveries"]] for r in flagged.iter_rows(named=True)]
    listing = f"<h3>Vehicles with a title brand or a lien/theft record ({_count(data.flagged_count)})</h3>" + _table(
        "table-flagged-vehicles", ["unit", "VIN", "fleet/depot", "vehicle", "title brands", "liens", "lien releases",
                                   "thefts", "recoveries"], rows, cap=data.flagged_count)
    return _section("title", "Title brands, theft and liens",
                    _grid([_chart("chart-title-lien-theft", traces, layout, "Vehicles per title brand and lien/theft event"),
                           f"<div>{tables}</div>"]) + listing)


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
    layout = {"title": {"text": title, "x": 0}, "height": max(360, 120 + 24 * rows), "font": {"family": "system-ui, sans-serif"},
              "margin": {"l": 10, "r": 10, "t": 50, "b": 10}, "legend": {"orientation": "h", "y": -0.2},
              "paper_bgcolor": "#fff", "plot_bgcolor": "#fff", **layout}
    for axis in ("xaxis", "yaxis"):
        layout[axis] = {"automargin": True, "gridcolor": "#e5e9ee", "zerolinecolor": "#cfd6dd", **layout.get(axis, {})}
    # Drawn once the page is laid out (PLOT, at the end of the body), so each chart takes its column's width.
    spec = _json({"data": traces, "layout": layout, "config": CHART_CONFIG})
    return (f'<div class="chart" id="{div_id}"></div>'
            f'<script type="application/json" class="chart-spec" data-for="{div_id}">{spec}</script>')


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
    body = "".join("<tr>" + "".join(_cell(v, i in money) for i, v in enumerate(row)) + "</tr>" for row in rows)
    more = ""
    if cap is not None and cap > len(rows):
        more = f"<p class=note>The first {_count(len(rows))} of {_count(cap)} shown; query the database for all.</p>"
    return (f'<div class="table-wrap"><table class="sortable" id="{table_id}" data-rows="{len(rows)}">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{more}")


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
    return f"<td>{_e(str(value))}</td>"


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


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2733;background:#f4f6f8}
header{background:#1d2733;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#b8c4d0;font-size:13px}main{padding:12px 28px 40px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:12px;margin:14px 0}
.card{background:#fff;border-radius:8px;padding:12px 14px;box-shadow:0 1px 2px #0002}
.card.alert{border-left:5px solid #c0392b}.card .label{color:#5b6b7b;font-size:12px;text-transform:uppercase}
.card .value{font-size:24px;font-weight:600;margin:2px 0}.card .detail{color:#5b6b7b;font-size:12px}
section{background:#fff;border-radius:8px;padding:6px 18px 16px;margin:16px 0;box-shadow:0 1px 2px #0002}
h2{font-size:18px;margin:12px 0 6px}h3{font-size:15px;margin:16px 0 6px}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:16px;align-items:start}.grid>*{min-width:0}
.chart{min-height:360px}.note{color:#5b6b7b;font-size:12px;margin:4px 0}.empty{color:#5b6b7b;font-style:italic}
.table-wrap{max-height:420px;overflow:auto;margin:6px 0}
table{border-collapse:collapse;width:100%;font-size:13px}
th{position:sticky;top:0;background:#e9eef3;text-align:left;padding:5px 8px;cursor:pointer;white-space:nowrap}
th[aria-sort=ascending]::after{content:" ▲"}th[aria-sort=descending]::after{content:" ▼"}
td{padding:4px 8px;border-bottom:1px solid #eef1f4}td.when{white-space:nowrap}td.num{text-align:right;font-variant-numeric:tabular-nums}
code{background:#eef1f4;padding:0 3px;border-radius:3px}
"""

PLOT = """
document.querySelectorAll("script.chart-spec").forEach(function (s) {
  var spec = JSON.parse(s.textContent);
  Plotly.newPlot(s.getAttribute("data-for"), spec.data, spec.layout, spec.config);
});
"""

# Click a header to sort by that column (numbers by their data-sort value, empty cells last), again to reverse.
SORTER = """
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0], col = th.cellIndex;
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var key = function (row) { var td = row.cells[col]; return td.hasAttribute("data-sort") ? td.getAttribute("data-sort") : td.textContent.trim(); };
    var rows = Array.prototype.slice.call(body.rows);
    var numeric = rows.every(function (r) { var k = key(r); return k === "" || !isNaN(Number(k)); });
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      if (x === "" || y === "") { return (x === "") - (y === ""); }
      var order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
      return ascending ? order : -order;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
<script>{plotlyjs}</script>
</head>
<body>
<header><h1>{title}</h1><p>{subtitle}</p></header>
<main>
<div class="cards">{cards}</div>
{sections}
</main>
<script>{plot}</script>
<script>{sorter}</script>
</body>
</html>
"""
