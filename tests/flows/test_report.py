"""`fleet report`: one HTML file, the fleet at a glance, for people in a hurry.

On databases built here row by row, the figures it shows are the rows' figures (the safety cards counted as the
to-do list counts them), "What changed" covers the period asked for (by default since the previous report and at
least the last 7 days), its text says only what holds, an empty database gives a page that says so, bad input gets
one line and exit code 2 (no service, no Prefect). In a real browser (Debian's headless Chromium, driven over CDP
by playwright; `.ci/run` installs it where missing): a refresh of the sample fleet against the sandbox writes the
report next to the lake, and opened from disk it loads with no console error and no request but the file itself,
measures under 20,000 px at 390 px wide and under 800 KB, every chart is drawn, the figures it shows equal the
database's, its tables sort, and printed every collapsed part opens.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from fleet_data.flows.backfill import backfill_fleet
from fleet_data.flows.cli import main
from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import BackfillOptions, RefreshOptions
from fleet_data.tasks.outputs.report import report_markdown, write_run_report
from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.outputs.summary import report as print_run_summary
from fleet_data.tasks.store.published import open_published
from fleet_data.tasks.store.published import publish_file as publish

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime.now(UTC)
V1, V2, V3, V4 = "1HGCM82633A004352", "1FTFW1E50KFA12345", "WBA3A5C51CF256651", "2T1BURHE0JC034461"
HOSTILE = '</script><script>window.pwned = 1</script><b>"Depot"</b>'  # a fleet column says anything
FORMULA = '=HYPERLINK("http://127.0.0.1:9/x","open")'  # a spreadsheet would run it as a formula


def build_fleet_db(path: Path) -> str:
    """Four vehicles: two valued, recalls (one park-it, one park-outside, one plain), a title brand, a mileage
    conflict, liens and thefts: V2's released and recovered (past), V4's lien active and theft not recovered (now);
    the run recorded three changes."""
    db_path = str(path)
    with open_database(db_path) as db:
        db.start_run("refresh", ["fleet.csv"], run_id="run-1", started_at=NOW - timedelta(minutes=5))
        db.land("vehicles", pl.DataFrame({"vin": [V1, V2, V3, V4], "unit_number": ["U1", "U2", "U3", "U4"],
                                          "fleet": ["North", "North", HOSTILE, FORMULA],
                                          "mileage": [150_000, 20_000, 5_384, None]}), "run-1")
        db.land("specs", pl.DataFrame({"vin": [V1, V2, V3], "year": [2003, 2019, 2012], "make": ["Honda", "Ford", "BMW"],
                                       "model": ["Accord", "F-150", "328i"]}), "run-1")
        db.land("market_values", pl.DataFrame([
            {"vin": V1, "valued_on": date(2026, 1, 10), "retail": 9000.0, "trade_in": 7000.0, "fetched_at": datetime(2026, 1, 10, tzinfo=UTC)},
            {"vin": V1, "valued_on": NOW.date(), "retail": 8000.5, "trade_in": 6000.0, "fetched_at": NOW},
            {"vin": V2, "valued_on": NOW.date(), "retail": 30000.0, "trade_in": 25000.0, "fetched_at": NOW},
        ]), "run-1")
        db.land("recall_checks", pl.DataFrame([
            {"vin": v, "checked_via": "vin", "recall_count": n, "has_recalls": n > 0, "campaigns_listed": True}
            for v, n in ((V1, 2), (V2, 1), (V3, 0))]), "run-1")
        db.land("recalls", pl.DataFrame([
            {"vin": V1, "nhtsa_campaign_number": "24V001", "component": "AIR BAGS", "park_it": True, "park_outside": False},
            {"vin": V1, "nhtsa_campaign_number": "19V500", "component": "SERVICE BRAKES", "park_it": False,
             "park_outside": False},
            {"vin": V2, "nhtsa_campaign_number": "23V100", "component": "ENGINE", "park_it": False, "park_outside": True},
        ]), "run-1")
        readings = [{"date": d, "odometer": o, "odometer_unit": "miles"} for d, o in
                    (("2019-05-01", 40_000), ("2024-03-02", 90_000), ("2024-03-02", 94_141))]
        db.land("history_reports", pl.DataFrame({
            "vin": [V3, V1], "title_brands": [["Salvage"], []], "brands_record_count": [1, 0],
            "history_information": [[json.dumps(r) for r in readings], [json.dumps(readings[0])]]},
            schema_overrides={"history_information": pl.List(pl.String)}), "run-1")
        db.land("lien_theft_events", pl.DataFrame([
            {"vin": V2, "event_index": 0, "event": "Lien", "details_list": ["Date: 2021-01-04", "Lienholder: Ally"]},
            {"vin": V2, "event_index": 1, "event": "Lien Release", "details_list": ["Date: 2022-06-01", "Lienholder: Ally"]},
            {"vin": V2, "event_index": 2, "event": "Theft", "details_list": ["Date: 2020-01-02"]},
            {"vin": V2, "event_index": 3, "event": "Recovery", "details_list": ["Date: 2020-02-10"]},
            {"vin": V4, "event_index": 0, "event": "Theft", "location": "Austin, TX",
             "details_list": ["Date: 2025-05-01", "Agency: APD"]},
            {"vin": V4, "event_index": 1, "event": "Lien", "details_list": ["Date: 2024-01-09", "Lienholder: First Bank"]}]),
            "run-1")
        db.connection.execute("""INSERT INTO changes VALUES
            ('run-1', $v1, 'recalls', 'new_recall', '24V001', 'park_now', NULL, '{"component": "AIR BAGS"}', $now, $now),
            ('run-1', $v2, 'market_value', 'value_move', '', 'info', '{"retail": 40000.0}', '{"retail": 30000.0}', $now, $now),
            ('run-1', $v3, 'history', 'new_title_brand', 'Salvage', 'high', '[]', '["Salvage"]', $now, $now),
            -- an earlier run's brand, 20 days ago, that V1's latest report no longer carries: nothing to do
            ('run-0', $v1, 'history', 'new_title_brand', 'Junk', 'high', '[]', '["Junk"]', $earlier, $earlier)""",
                              {"v1": V1, "v2": V2, "v3": V3, "now": NOW, "earlier": NOW - timedelta(days=20)})
        db.land("fetch_status", pl.DataFrame([
            {"vin": V1, "dataset": "specs", "outcome": "found", "fetched_at": NOW - timedelta(days=400)},  # stale
            {"vin": V2, "dataset": "specs", "outcome": "found", "fetched_at": NOW},
            {"vin": V1, "dataset": "recalls", "outcome": "found", "fetched_at": NOW}]), "run-1")
        db.land("api_calls", pl.DataFrame([
            {"call_id": f"c{i}", "endpoint": e, "status": s, "units": u, "fetched_at": t} for i, (e, s, u, t) in enumerate([
                ("/specs", 200, 1, datetime(2026, 1, 10, tzinfo=UTC)), ("/specs", 200, 1, NOW),
                ("/v2/marketvalue", 200, 1, NOW), ("/v2/marketvalue", 200, 1, NOW)])],
            schema={"call_id": pl.String, "endpoint": pl.String, "status": pl.Int32, "units": pl.Int32,
                    "fetched_at": pl.Datetime("us", "UTC")}), "run-1")
        db.finish_run("run-1", "completed", finished_at=NOW - timedelta(minutes=4))
    publish(db_path)
    return db_path


def empty_db(path: Path) -> str:
    with open_database(str(path)):
        pass  # migrated, views created, no row
    publish(str(path))
    return str(path)


@pytest.fixture(scope="module")
def fleet_db(tmp_path_factory) -> str:
    return build_fleet_db(tmp_path_factory.mktemp("report") / "fleet.duckdb")


def shown(page: str) -> dict[str, str]:
    """The headline figures as the page's elements carry them (id -> data-value)."""
    return dict(re.findall(r'id="([a-z-]+)" data-value="([^"]*)"', page))


def table_rows(page: str, table_id: str) -> list[list[str]]:
    body = re.search(rf'<table class="sortable[^"]*" id="{table_id}".*?<tbody>(.*?)</tbody>', page, re.DOTALL)
    assert body, f"no table {table_id}"
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", body.group(1))]


SAFETY_TABLES = ("park-now", "park-outside", "stolen-now", "active-liens", "new-title-brands")


def todo_on_page(page: str) -> list[tuple[str, str, str]]:
    """The to-do list as the page shows it: (category, unit, reason) per row, category by category."""
    categories = dict(zip(SAFETY_TABLES, ("park now", "park outside", "stolen", "active lien", "title brand")))
    return [(categories[t], r[0], html.unescape(r[4])) for t in SAFETY_TABLES if f'id="table-todo-{t}"' in page
            for r in table_rows(page, f"table-todo-{t}")]


def bars(page: str) -> dict[str, dict[str, dict[str, float]]]:
    """Per chart (an SVG of ours): per series, label -> value, from the bars' data attributes."""
    found: dict[str, dict[str, dict[str, float]]] = {}
    for match in re.finditer(r'<svg class="bars" id="([a-z-]+)"(.*?)</svg>', page, re.DOTALL):
        chart, svg = match[1], match[2]
        series = found.setdefault(chart, {})
        for name, label, value in re.findall(r'<rect [^>]*data-series="([^"]*)" data-label="([^"]*)" '
                                             r'data-value="([^"]*)"', svg):
            series.setdefault(html.unescape(name), {})[html.unescape(label)] = float(value)
    return found


def test_report_shows_the_databases_figures(fleet_db, tmp_path, capsys):
    out = tmp_path / "out" / "fleet.html"
    assert main(["report", "--db", fleet_db, "--out", str(out)]) == 0
    todo_csv = out.with_name("fleet.todo.csv")
    assert capsys.readouterr().out.strip() == (
        f"wrote {out} (4 vehicles; 1 to park now, 1 to park outside; 3 changes in the last 7 days) and the to-do list "
        f"{todo_csv} (5 rows, then 1 of data hygiene)")
    page = out.read_text(encoding="utf-8")
    # Safety first, each counted as the to-do list counts it; then the fleet now. Current states: V2's lien was
    # released and its theft recovered; V4's lien holds and it was not recovered.
    assert shown(page) == {"park-now": "1", "park-outside": "1", "stolen-now": "1", "active-liens": "1",
                           "new-title-brands": "1", "mileage-conflicts": "1", "rejected-rows": "0", "vehicle-count": "4",
                           "total-value": "38000.5", "open-recalls": "3", "title-branded": "1"}
    assert "$38,000" in page  # rounded for people, exact in data-value
    # Today's value by depot: V1 and V2 in North; the hostile depots have a vehicle each but no valuation.
    assert table_rows(page, "table-value-by-depot") == [
        ["North", "2", "2", "$38,000", "$31,000"],
        [HOSTILE.replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;"), "1", "0", "", ""],
        [FORMULA.replace('"', "&quot;"), "1", "0", "", ""]]
    assert table_rows(page, "table-recalls-by-component") == [
        ["AIR BAGS", "1", "1", "0", "1", "0"], ["ENGINE", "1", "1", "0", "0", "1"], ["SERVICE BRAKES", "1", "1", "0", "0", "0"]]
    assert [(r[0], r[4], r[6]) for r in table_rows(page, "table-vehicles-to-park")] == [
        ("U1", "24V001", "park it"), ("U2", "23V100", "park outside")]
    assert [r[:1] + r[4:] for r in table_rows(page, "table-flagged-vehicles")] == [
        ["U4", "", "1", "First Bank", "yes", "2"], ["U3", "Salvage", "", "", "", ""]]  # V2's records are all past;
    # V3's lien/theft was never asked: its events are unknown, not 0 (issue 26).
    assert table_rows(page, "table-lien-theft") == [
        ["stolen, not recovered", "yes", "1"], ["active lien", "yes", "1"], ["theft recovered (past)", "no", "1"],
        ["liens released (past)", "no", "1"]]
    freshness = {r[0]: r[1:6] for r in table_rows(page, "table-freshness")}
    assert freshness["specs"] == ["365 days", "1", "1", "2", "0"]  # fresh, stale (400 days old), no answer yet, no data
    assert freshness["recalls"] == ["7 days", "1", "0", "3", "0"]
    # Units per month: January's call apart from this month's three.
    assert [r[1:3] for r in table_rows(page, "table-units-by-month")] == [["3", "3"], ["1", "1"]]
    # The charts are SVG of ours (no charting library in the page); the value trend carries January's
    # valuation of V1 forward until today's.
    charts = bars(page)
    assert set(charts) == {"chart-value-by-depot", "chart-value-by-make", "chart-recalls-by-component",
                           "chart-title-lien-theft", "chart-freshness", "chart-units-by-month"}
    assert "plotly" not in page.lower() and len(page.encode()) < 100_000
    # The title/lien chart shows states now, not events (a recovery or a release is no bar of its own).
    assert charts["chart-title-lien-theft"] == {"title brand": {"Salvage": 1.0},
                                                "theft / lien now": {"stolen, not recovered": 1.0, "active lien": 1.0}}
    # In trade-in value: the service's six months of history carry no retail (tasks/outputs/report_page.py).
    by_depot = charts["chart-value-by-depot"]
    assert by_depot["North"]["2026-01"] == 7000.0 and by_depot["North"][f"{NOW:%Y-%m}"] == 31000.0
    assert charts["chart-recalls-by-component"] == {"park it": {"AIR BAGS": 1.0}, "park outside": {"ENGINE": 1.0},
                                                    "other": {"SERVICE BRAKES": 1.0}}


def test_the_report_puts_safety_first_then_what_changed_then_data_hygiene(fleet_db, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", "--db", fleet_db, "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    order = [page.index(f'id="{s}"') for s in ("banner", "todo", "changes", "hygiene", "fleet", "value", "recalls",
                                              "title", "freshness", "units")]
    assert order == sorted(order)
    assert todo_on_page(page) == [
        ("park now", "U1", "24V001 AIR BAGS: do not drive"),
        ("park outside", "U2", "23V100 ENGINE: park outside, away from buildings"),
        ("stolen", "U4", "theft reported on 2025-05-01 in Austin, TX (APD); not recovered"),
        ("active lien", "U4", "lien held by First Bank since 2024-01-09; not released"),
        ("title brand", "U3", "title newly branded Salvage")]
    # Mileage conflicts are data hygiene: in their own collapsed section, not on the to-do list.
    assert re.search(r'<section id="hygiene"><details class="section"><summary>', page)
    assert [(r[0], r[4], r[5], r[6], r[7]) for r in table_rows(page, "table-mileage-conflicts")] == [
        ("U3", "5,384 mi", "94,141 mi", "2024-03-02", "88,757")]
    # What changed in the last 7 days (no report recorded yet), most severe first; the info ones collapsed. The
    # run-0 brand of 20 days ago is outside the period.
    assert [(r[0], r[1], r[5], r[6]) for r in table_rows(page, "table-changes")] == [
        ("park now", "U1", "new recall", "24V001 AIR BAGS"), ("high", "U3", "new title brand", "Salvage")]
    assert [(r[0], r[1], r[5], r[6]) for r in table_rows(page, "table-changes-info")] == [
        ("info", "U2", "value moved", "retail $40,000 → $30,000 (-25.0%)")]
    assert "What changed in the last 7 days" in page and "3 changes on 3 vehicles recorded since" in page
    # No false text: every listed campaign is listed; nothing says one is not.
    assert "not listed" not in page and "listed for the vehicles' models only" not in page


def test_the_to_do_list_is_written_beside_the_report_for_spreadsheets(fleet_db, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", "--db", fleet_db, "--out", str(out)]) == 0
    csv = tmp_path / "todo.csv"
    assert csv.read_bytes().startswith(b"\xef\xbb\xbf")  # the BOM: Excel reads the names as UTF-8
    rows = pl.read_csv(csv, infer_schema=False)
    assert rows.columns == ["category", "unit_number", "vin", "plate", "fleet", "year", "make", "model", "reason", "since"]
    # The page's to-do list, then the data hygiene rows.
    listed = [(r["category"], r["unit_number"], r["reason"]) for r in rows.iter_rows(named=True)]
    assert listed[:-1] == todo_on_page(out.read_text(encoding="utf-8"))
    # The reason is the view mileage_conflicts' own: what the valuation is really asked with.
    assert listed[-1] == ("mileage conflict", "U3", "fleet file says 5,384 mi, history read 94,141 mi on 2024-03-02: "
                                                    "88,757 mi more; not valued yet (valuations ask with the reading)")
    assert rows.filter(pl.col("unit_number") == "U4")["fleet"].to_list() == ["'" + FORMULA] * 2  # text, not a formula
    assert rows.filter(pl.col("category") == "mileage conflict")["since"].to_list() == ["2024-03-02"]


def test_names_from_the_fleet_file_cannot_break_out_of_the_page(fleet_db, tmp_path):
    out = tmp_path / "r.html"
    assert main(["report", "--db", fleet_db, "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "window.pwned" in page  # the name is shown...
    assert "<script>window.pwned" not in page  # ...as text, never as markup


def test_an_empty_database_gives_a_page_that_says_so(tmp_path):
    db = empty_db(tmp_path / "fleet.duckdb")
    out = tmp_path / "report.html"
    assert main(["report", "--db", db, "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert shown(page) == {"park-now": "0", "park-outside": "0", "stolen-now": "0", "active-liens": "0",
                           "new-title-brands": "0", "mileage-conflicts": "0", "rejected-rows": "0", "vehicle-count": "0",
                           "total-value": "", "open-recalls": "0", "title-branded": "0"}
    assert (tmp_path / "todo.csv").read_text(encoding="utf-8-sig").splitlines() == [
        "category,unit_number,vin,plate,fleet,year,make,model,reason,since"]
    for said in ("Nothing to do", "No finished refresh yet", "Nothing to correct", "No valuation yet", "No open recall",
                 "No title brand, lien or theft record", "No vehicle on the roster yet", "No call made yet", "no run yet"):
        assert said in page
    assert '<svg class="bars"' not in page


# --- the period "What changed" covers ---------------------------------------------------------------


def with_report_written(path: Path, days_ago: int) -> str:
    """`build_fleet_db`, and a report recorded as written by a run `days_ago` days ago."""
    db_path = build_fleet_db(path)
    with open_database(db_path) as db:
        db.execute("report_record", run_id="run-r", written_at=NOW - timedelta(days=days_ago), path="/r/report.html",
                   changes_since=NOW - timedelta(days=days_ago + 7), changes=0, to_do=0)
    publish(db_path)
    return db_path


def changes_shown(page: str) -> list[tuple[str, str, str]]:
    """(unit, change, recorded) of every change listed, urgent and others."""
    return [(r[1], r[5], r[7]) for t in ("table-changes", "table-changes-info") if f'id="{t}"' in page
            for r in table_rows(page, t)]


def test_what_changed_covers_since_the_previous_report_and_at_least_a_week(tmp_path):
    today, earlier = f"{NOW:%Y-%m-%d}", f"{NOW - timedelta(days=20):%Y-%m-%d}"
    # A report 3 days ago: the last 7 days still show (a later run that changed nothing does not empty the list),
    # the changes recorded since that report marked new.
    recent = with_report_written(tmp_path / "recent.duckdb", days_ago=3)
    assert main(["report", "--db", recent, "--out", str(tmp_path / "recent.html")]) == 0
    page = (tmp_path / "recent.html").read_text(encoding="utf-8")
    assert "What changed in the last 7 days" in page
    assert sorted(changes_shown(page)) == [("U1", "new recall", f"{today} new"), ("U2", "value moved", f"{today} new"),
                                           ("U3", "new title brand", f"{today} new")]
    # A report 25 days ago: everything since it, the brand of 20 days ago included (new since that report too).
    old = with_report_written(tmp_path / "old.duckdb", days_ago=25)
    assert main(["report", "--db", old, "--out", str(tmp_path / "old.html")]) == 0
    page = (tmp_path / "old.html").read_text(encoding="utf-8")
    assert f"What changed since the previous report ({NOW - timedelta(days=25):%Y-%m-%d}" in page
    assert ("U1", "new title brand", f"{earlier} new") in changes_shown(page) and len(changes_shown(page)) == 4


def test_fleet_report_since_a_date_or_a_run(fleet_db, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", "--db", fleet_db, "--out", str(out), "--since", f"{NOW - timedelta(days=30):%Y-%m-%d}"]) == 0
    page = out.read_text(encoding="utf-8")
    assert len(changes_shown(page)) == 4 and f"What changed since {NOW - timedelta(days=30):%Y-%m-%d} 00:00 UTC" in page
    assert main(["report", "--db", fleet_db, "--out", str(out), "--since", "run-1"]) == 0
    page = out.read_text(encoding="utf-8")
    assert len(changes_shown(page)) == 3 and "What changed since run run-1 started" in page
    assert main(["report", "--db", fleet_db, "--out", str(out), "--since", f"{NOW + timedelta(days=1):%Y-%m-%dT%H:%M}"]) == 0
    assert "Nothing changed in this period." in out.read_text(encoding="utf-8")
    capsys.readouterr()
    assert main(["report", "--db", fleet_db, "--out", str(out), "--since", "run-9"]) == 2
    assert capsys.readouterr().err == f"error: --since run-9: neither a date (YYYY-MM-DD) nor a run in {fleet_db}\n"


def test_changes_since_is_a_table_macro_analysts_query(fleet_db):
    import duckdb

    with duckdb.connect(fleet_db, read_only=True) as con:  # the published file, as analysts open it
        rows = con.execute("SELECT unit_number, kind, severity_rank FROM changes_since($since)",
                           {"since": NOW - timedelta(days=30)}).fetchall()
        since_report = con.execute("SELECT count(*) FROM changes_since(coalesce((SELECT max(written_at) FROM reports), "
                                   "TIMESTAMPTZ '2000-01-01 00:00:00+00'))").fetchall()
    assert rows == [("U1", "new_recall", 1), ("U3", "new_title_brand", 3), ("U1", "new_title_brand", 3),
                    ("U2", "value_move", 4)]  # most severe first, then newest first
    assert since_report == [(4,)]


def test_the_recalls_section_says_what_is_listed_and_what_is_not(tmp_path):
    """Open recalls counted by a batch check: those listed for the model only are said to be so, those with no
    listing at all are said not listed; nothing promises what a next run will do."""
    db_path = str(tmp_path / "recalls.duckdb")
    with open_database(db_path) as db:
        db.start_run("refresh", ["fleet.csv"], run_id="run-1")
        db.land("vehicles", pl.DataFrame({"vin": [V1, V2, V3]}), "run-1")
        db.land("recall_checks", pl.DataFrame([
            {"vin": v, "checked_via": "batch", "recall_count": n, "has_recalls": True, "campaigns_listed": False}
            for v, n in ((V1, 2), (V2, 3), (V3, 1))]), "run-1")
        db.land("recalls", pl.DataFrame([  # V1's two campaigns, listed for its model only; V2 and V3 none listed
            {"vin": V1, "nhtsa_campaign_number": c, "component": "AIR BAGS", "matched_by": "model", "park_it": False,
             "park_outside": False} for c in ("24V001", "24V002")]), "run-1")
        db.finish_run("run-1", "completed")
    publish(db_path)
    out = tmp_path / "r.html"
    assert main(["report", "--db", db_path, "--out", str(out)]) == 0
    text = re.sub(r"<[^>]+>", "", out.read_text(encoding="utf-8"))
    assert ("4 open recalls on 2 vehicles are counted by their latest batch check, but their campaigns are not "
            "listed") in text
    assert "2 open recalls on 1 vehicle are listed for their models only" in text
    assert "the next refresh asks for them" not in text


def test_bad_input_is_one_line_and_exit_code_2(fleet_db, tmp_path, capsys):
    missing = tmp_path / "nowhere.duckdb"
    assert main(["report", "--db", str(missing), "--out", str(tmp_path / "r.html")]) == 2
    assert capsys.readouterr().err == f"error: {missing}: no such database (run `fleet refresh` first, or pass --db)\n"
    assert not missing.exists() and not (tmp_path / "r.html").exists()
    assert main(["report", "--db", fleet_db, "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert main(["report", "--db", fleet_db, "--out", str(blocked / "r.html")]) == 2
    assert capsys.readouterr().err.startswith(f"error: cannot write {blocked / 'r.html'}")


def test_a_database_without_the_reports_views_says_how_to_update_it(tmp_path, capsys):
    import duckdb

    old = tmp_path / "old.duckdb"
    build_fleet_db(old)
    with duckdb.connect(str(old)) as con:  # as written by a version before the report
        con.execute("DROP VIEW fleet_value_by_month")
    assert main(["report", "--db", str(old), "--out", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {old} lacks what the report reads") and err.count("\n") == 1


def test_report_needs_no_prefect_and_no_service(fleet_db, tmp_path):
    script = ("import sys; from flows.cli import main; code = main(['report', '--db', sys.argv[1], '--out', sys.argv[2]]); "
              "assert 'prefect' not in sys.modules, 'prefect imported'; sys.exit(code)")
    env = {**os.environ, "PREFECT_API_URL": "http://127.0.0.1:9/api", "VDS_BASE_URL": "http://127.0.0.1:9"}
    done = subprocess.run([sys.executable, "-c", script, fleet_db, str(tmp_path / "r.html")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r.html").is_file()


def test_a_report_that_cannot_be_built_does_not_fail_the_run(fleet_db, tmp_path):
    class Broken:
        def query(self, name: str, **params: object) -> pl.DataFrame:
            raise OSError("disk on fire")

    assert write_run_report(Broken(), str(tmp_path / "fleet.duckdb"), None) == (None, "OSError: disk on fire")
    assert report_markdown(None, "OSError: disk on fire") == "\n\n**Fleet report** not written: OSError: disk on fire"

    with open_published(fleet_db) as db:
        where, problem = write_run_report(db, str(tmp_path / "fleet.duckdb"), str(tmp_path / "lake"))
    assert (where, problem) == (tmp_path / "lake" / "report.html", None) and where.is_file()
    todo = where.with_name("todo.csv")
    assert todo.is_file() and report_markdown(where, None) == (
        f"\n\n**Fleet report**: [report.html]({where.as_uri()}) (`{where}`); "
        f"to-do list for spreadsheets: [todo.csv]({todo.as_uri()}) (`{todo}`)")
    with open_published(fleet_db) as db:
        assert write_run_report(db, str(tmp_path / "fleet.duckdb"), None)[0] == tmp_path / "fleet.report.html"
    assert (tmp_path / "fleet.todo.csv").is_file()


# --- in Chromium ------------------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Skipped, saying why, where chromium is not installed; CI (.ci/run) installs it and requires it.
needs_chromium = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("FLEET_REQUIRE_CHROMIUM"),
                                    reason="Debian's chromium is not installed (apt-get install chromium; .ci/run does it)")
DESKTOP, PHONE, A4 = 1400, 390, 794  # A4 paper is 794 CSS pixels wide
CHARTS = ("chart-value-by-depot", "chart-value-by-make", "chart-recalls-by-component", "chart-title-lien-theft",
          "chart-freshness", "chart-units-by-month")
# The sample fleet's report (issue 30; before: 180,435 px tall at 390 px, 5,261,412 bytes with plotly.js inside).
PHONE_HEIGHT_LIMIT, SIZE_LIMIT = 20_000, 800_000


@contextmanager
def chromium() -> Iterator[Callable[..., Visit]]:
    """`visit(path)` opens a page in the system's headless Chromium (nothing downloaded).

    Started only once a test's Prefect and asyncio work is over: playwright's sync API keeps an event
    loop running in this thread, where the refresh's tasks would then refuse to start theirs.
    """
    from playwright.sync_api import sync_playwright

    opened: list[Visit] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)

        def visit(path: Path, width: int = DESKTOP) -> Visit:
            opened.append(Visit(browser, path, width))
            return opened[-1]

        try:
            yield visit
        finally:
            for page in opened:
                page.close()
            browser.close()


class Visit:
    """One page opened from disk, with every console message, page error and request it caused."""

    def __init__(self, browser: Any, path: Path, width: int = DESKTOP):
        self.url = path.resolve().as_uri()
        phone = width <= PHONE  # as a phone: its viewport meta tag applies, touch instead of a mouse
        self.context = browser.new_context(viewport={"width": width, "height": 844 if phone else 1000},
                                           is_mobile=phone, has_touch=phone, device_scale_factor=2 if phone else 1)
        self.console: list[tuple[str, str]] = []
        self.errors: list[str] = []
        self.requests: list[str] = []
        # Only the file itself is let through: nothing may leave the machine, should the page try.
        self.context.route("**/*", lambda route: route.continue_() if route.request.url == self.url else route.abort())
        self.page = self.context.new_page()
        self.page.on("console", lambda m: self.console.append((m.type, m.text)))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(self.url, wait_until="load")

    def value(self, element_id: str) -> str:
        return self.page.get_attribute(f"#{element_id}", "data-value")

    def text(self, element_id: str) -> str:
        return self.page.inner_text(f"#{element_id}")

    def height(self) -> int:
        """How tall the page is as laid out at this width, every collapsed part as it opens (closed)."""
        return self.page.evaluate("() => Math.max(document.documentElement.scrollHeight, document.body.scrollHeight)")

    def drawn(self) -> dict[str, dict[str, int]]:
        """Per chart: its bars, and those with a visible size once laid out (opened wherever it is collapsed)."""
        return self.page.evaluate("""() => Object.fromEntries(Array.from(document.querySelectorAll("svg.bars")).map(
            c => [c.id, {bars: c.querySelectorAll("rect").length,
                         visible: Array.from(c.querySelectorAll("rect")).filter(r => {
                             const b = r.getBoundingClientRect(); return b.width > 0 && b.height > 0; }).length}]))""")

    def open_all(self) -> None:
        self.page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")

    def closed(self) -> int:
        return self.page.evaluate("() => document.querySelectorAll('details:not([open])').length")

    def column(self, table_id: str, index: int) -> list[str]:
        return self.page.eval_on_selector_all(f"#{table_id} tbody tr", f"rows => rows.map(r => r.cells[{index}].textContent)")

    def layout(self) -> dict[str, Any]:
        """What a reader at this width sees: sideways overflow, inner scrolls, table cells hidden or cut off (other
        than in collapsed parts, there to be opened), labels of a chart drawn over one another."""
        return self.page.evaluate("""() => {
            const width = window.innerWidth, d = document.documentElement;
            const wide = Array.from(document.querySelectorAll("main *, header *")).filter(e => {
                const r = e.getBoundingClientRect(); return r.width > 0 && r.right > width + 1; });
            const scrolls = Array.from(document.querySelectorAll("main *")).filter(e => {
                const s = getComputedStyle(e);
                return (e.scrollHeight > e.clientHeight + 1 && /auto|scroll|hidden/.test(s.overflowY) && e.tagName !== "svg")
                       || (e.scrollWidth > e.clientWidth + 1 && /auto|scroll/.test(s.overflowX)); });
            const hidden = Array.from(document.querySelectorAll("table tbody tr, table tbody td")).filter(r => {
                if (r.closest("details:not([open])") || (r.tagName === "TD" && r.textContent === "")) return false;
                const b = r.getBoundingClientRect(); return b.height === 0 || b.width === 0 || b.right > width + 1; });
            const cramped = Array.from(document.querySelectorAll(".card, .card *")).filter(e => e.scrollWidth > e.clientWidth + 1);
            const labels = Array.from(document.querySelectorAll("svg.bars text")).filter(t => !t.closest("details:not([open])"))
                .filter(t => { const b = t.getBoundingClientRect(); return b.right > t.closest("svg").getBoundingClientRect().right + 1; });
            const name = e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && e.className.baseVal === undefined ? "." + e.className : "");
            return {width: width, scroll_width: Math.max(d.scrollWidth, document.body.scrollWidth),
                    too_wide: wide.slice(0, 5).map(name).concat(cramped.map(name)), inner_scrolls: scrolls.map(name),
                    hidden_cells: hidden.length, labels_cut: labels.map(t => t.textContent)};
        }""")

    def rows(self, table_id: str) -> list[list[str]]:
        return self.page.eval_on_selector_all(f"#{table_id} tbody tr",
                                              "rows => rows.map(r => Array.from(r.cells).map(c => c.textContent))")

    def close(self) -> None:
        self.context.close()


async def latest_summary_artifact() -> str:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    async with get_client() as client:
        found = await client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["fleet-refresh-summary"])),
                                            sort=ArtifactSort.CREATED_DESC, limit=1)
    return str(found[0].data)


PARK_IT = {"nhtsa_campaign_number": "26V999000", "component": "AIR BAGS", "park_it": True,
           "summary": "The driver air bag inflator may rupture."}
# Where the test leaves its screenshots (docs/ shows them: FLEET_REPORT_SCREENSHOTS=docs); else the test's folder.
SCREENSHOTS = os.environ.get("FLEET_REPORT_SCREENSHOTS")
SAMPLE = ROOT / "data" / "sample_fleet.csv"


def refresh_twice(sandbox: Any, db_path: str, lake: Path) -> tuple[dict[str, Any], str, str]:
    """The sample fleet refreshed, then its recalls and history again, after the service said that a vehicle must
    be parked and that another got a title brand."""
    first = refresh_fleet([str(SAMPLE)], RefreshOptions(db=db_path, lake=str(lake)))
    assert first["status"] == "completed"
    with open_published(db_path) as db:  # two vehicles the service knows
        park_vin, brand_vin = [r[0] for r in db.connection.execute(
            "SELECT vin FROM fetch_status WHERE dataset = 'history' AND outcome = 'found' INTERSECT "
            "SELECT vin FROM fetch_status WHERE dataset = 'specs' AND outcome = 'found' ORDER BY vin LIMIT 2").fetchall()]
    sandbox.set_vehicle(park_vin, recalls=[PARK_IT])
    sandbox.set_vehicle(brand_vin, title_brands=["Flood"])
    summary = refresh_fleet([str(SAMPLE)], RefreshOptions(db=db_path, lake=str(lake), force=True,
                                                          datasets=["recalls", "history"]))
    assert summary["status"] == "completed"
    return summary, park_vin, brand_vin


def counted(db_path: str) -> dict[str, Any]:
    """What analysts read, counted here from the tables themselves."""
    with open_published(db_path) as db:
        def one(sql: str, **params: Any) -> Any:
            return db.connection.execute(sql, params).fetchall()[0][0]

        park = "FROM recalls SEMI JOIN vehicles USING (vin) WHERE closed_at IS NULL AND matched_by = 'vin'"
        return {
            "vehicles": one("SELECT count(*) FROM vehicles"),
            "total": one("""SELECT sum(retail) FROM (SELECT vin, retail FROM market_values QUALIFY row_number() OVER
                            (PARTITION BY vin ORDER BY valued_on DESC, fetched_at DESC) = 1) SEMI JOIN vehicles USING (vin)"""),
            "open_recalls": one("SELECT count(*) FROM recalls SEMI JOIN vehicles USING (vin) WHERE closed_at IS NULL"),
            "park_now": one(f"SELECT count(DISTINCT vin) {park} AND park_it"),
            "park_outside": one(f"SELECT count(DISTINCT vin) {park} AND park_outside AND vin NOT IN "
                                f"(SELECT vin {park} AND park_it)"),
            "park_rows": one(f"SELECT count(*) {park} AND (park_it OR park_outside)"),
            "changes": one("SELECT count(*) FROM changes SEMI JOIN vehicles USING (vin)"),
            "makes": one("SELECT count(DISTINCT coalesce(make, '(unknown)')) FROM vehicle_overview"),
            "reports": db.connection.execute("SELECT run_id, changes FROM reports ORDER BY written_at").fetchall(),
        }


def check_reads_at(page: Visit, width: int, todo: pl.DataFrame, n: dict[str, Any], park_vin: str, brand_vin: str) -> None:
    """At this width: no error, no request, nothing too wide or scrolling inside, to-do and changes all shown."""
    assert page.errors == [] and [m for m in page.console if m[0] in ("error", "warning")] == [], width
    assert page.requests == [page.url]  # the file itself, nothing else: the charts and the data are inside it
    seen = page.layout()
    assert seen["scroll_width"] <= width and seen["too_wide"] == [] and seen["labels_cut"] == [], seen
    assert seen["inner_scrolls"] == [] and seen["hidden_cells"] == 0, seen
    # Safety first, each category's rows as many as its card says, a reason on every row; then the changes.
    for card in SAFETY_TABLES:
        rows = page.rows(f"table-todo-{card}") if page.page.query_selector(f"#table-todo-{card}") else []
        assert len(rows) == int(page.value(card)) and all(r[4] for r in rows), card
    assert sum(int(page.value(card)) for card in SAFETY_TABLES) == todo.filter(pl.col("category") != "mileage conflict").height
    assert any(r[1] == park_vin and "26V999000 AIR BAGS: do not drive" in r[4] for r in page.rows("table-todo-park-now"))
    urgent, other = page.rows("table-changes"), page.rows("table-changes-info") if n["changes"] > 2 else []
    assert len(urgent) + len(other) == n["changes"] and urgent[0][0] == "park now"
    assert any(r[2] == park_vin and r[5:7] == ["new recall", "26V999000 AIR BAGS"] for r in urgent)
    assert any(r[2] == brand_vin and r[5:7] == ["new title brand", "Flood"] for r in urgent)
    assert len(page.rows("table-value-by-make")) == n["makes"]


@needs_chromium
@pytest.mark.usefixtures("prefect_server")
@pytest.mark.timeout(900)  # the sample fleet refreshed (about 5,700 calls) and a backfill, on 2 busy cores
def test_every_refresh_writes_the_report_and_chromium_shows_the_databases_figures(service, db_path, tmp_path, capsys):
    lake = tmp_path / "lake"
    summary, park_vin, brand_vin = refresh_twice(service(), db_path, lake)
    report, todo_csv = lake / "report.html", lake / "todo.csv"
    assert summary["report"] == str(report) and report.is_file()
    assert summary["todo"] == str(todo_csv) and todo_csv.is_file()
    artifact = asyncio.run(latest_summary_artifact())
    assert f"[report.html]({report.resolve().as_uri()})" in artifact and f"[todo.csv]({todo_csv.resolve().as_uri()})" in artifact
    capsys.readouterr()
    print_run_summary(summary, as_json=False)  # what `fleet refresh` prints last: where the page and the list are
    assert f"report: {report}; to-do list: {todo_csv}" in capsys.readouterr().out

    n = counted(db_path)
    assert n["vehicles"] == 996 and n["total"] > 0 and n["open_recalls"] > 0 and n["park_now"] > 0  # it tests something
    assert summary["changes"]["total"] == n["changes"] >= 2
    # Each run recorded its report: the second's counted the changes the first's could not have.
    assert [changes for _, changes in n["reports"]] == [0, n["changes"]]
    # A later run that changes nothing (a backfill of one unit) writes a report that still lists them.
    later = backfill_fleet(BackfillOptions(db=db_path, lake=str(lake), vins=[park_vin], datasets=["specs"]))
    assert later["changes"]["total"] == 0 and later["report"] == str(report)
    todo = pl.read_csv(todo_csv, infer_schema=False)
    assert {("park now", park_vin), ("title brand", brand_vin)} <= set(todo.select("category", "vin").iter_rows())
    size = report.stat().st_size
    with chromium() as visit:
        for width in (PHONE, DESKTOP):
            page = visit(report, width)
            check_reads_at(page, width, todo, n, park_vin, brand_vin)
            name = "phone" if width == PHONE else "desktop"
            page.page.screenshot(path=str(Path(SCREENSHOTS or tmp_path) / f"report-{name}.png"))
            page.page.evaluate("document.getElementById('changes').scrollIntoView()")
            page.page.screenshot(path=str(Path(SCREENSHOTS or tmp_path) / f"report-{name}-changes.png"))
        phone = visit(report, PHONE)
        height = phone.height()
        print(f"the sample fleet's report: {height:,} px tall at {PHONE} px, {size:,} bytes")  # -s shows the figures
        assert height < PHONE_HEIGHT_LIMIT and size < SIZE_LIMIT, (height, size)
        check_print(visit(report, A4))
        drawn = page.drawn()
        assert set(drawn) == set(CHARTS) and all(d["bars"] > 0 and d["visible"] == d["bars"] for d in drawn.values()), drawn
        assert (int(page.value("vehicle-count")), int(page.value("open-recalls")), int(page.value("park-now")),
                int(page.value("park-outside"))) == (n["vehicles"], n["open_recalls"], n["park_now"], n["park_outside"])
        assert float(page.value("total-value")) == pytest.approx(float(n["total"]), rel=1e-12)  # summed in another order
        assert (page.text("vehicle-count"), page.text("total-value"), page.text("park-now")) == (
            f"{n['vehicles']:,}", f"${n['total']:,.0f}", f"{n['park_now']:,}")
        assert len(page.column("table-vehicles-to-park", 0)) == n["park_rows"]
        check_sorting(page)


def check_print(printed: Visit) -> None:
    """On paper: every collapsed part open, nothing wider than the paper, no table cell cut off."""
    closed = printed.closed()
    assert closed > 0  # there are collapsed parts...
    printed.page.emulate_media(media="print")
    # ...and printed they open (media changes reach the page at its next frame: a big page takes a while).
    printed.page.wait_for_function("() => document.querySelectorAll('details:not([open])').length === 0", timeout=60_000)
    seen = printed.layout()
    assert seen["scroll_width"] <= A4 and seen["inner_scrolls"] == [] and seen["hidden_cells"] == 0, seen
    printed.page.emulate_media(media="screen")  # back on screen, as the reader left them
    printed.page.wait_for_function(f"() => document.querySelectorAll('details:not([open])').length === {closed}",
                                   timeout=60_000)


def check_sorting(page: Visit) -> None:
    """Tables sort: by a text column, then by a number column (numerically, not as text), then the other way."""
    page.open_all()
    page.page.click("#table-recalls-by-component th:nth-child(1)")
    components = page.column("table-recalls-by-component", 0)
    assert components == sorted(components, key=str.casefold) and len(components) > 1
    page.page.click("#table-recalls-by-component th:nth-child(3)")
    counts = [int(c.replace(",", "")) for c in page.column("table-recalls-by-component", 2)]
    assert counts == sorted(counts)
    page.page.click("#table-recalls-by-component th:nth-child(3)")
    assert [int(c.replace(",", "")) for c in page.column("table-recalls-by-component", 2)] == sorted(counts, reverse=True)
    assert page.errors == [] and [m for m in page.console if m[0] == "error"] == []


@needs_chromium
def test_an_empty_database_and_hostile_names_render_without_an_error(tmp_path):
    pages = {}
    for name, db in (("empty", empty_db(tmp_path / "empty.duckdb")), ("hostile", build_fleet_db(tmp_path / "fleet.duckdb"))):
        pages[name] = tmp_path / f"{name}.html"
        assert main(["report", "--db", db, "--out", str(pages[name])]) == 0
    with chromium() as visit:
        for name, out in pages.items():
            page = visit(out)
            assert page.errors == [] and [m for m in page.console if m[0] in ("error", "warning")] == [], name
            assert page.requests == [page.url], name
            assert page.page.evaluate("typeof window.pwned") == "undefined", name  # a depot's name stays a name
            if name == "empty":
                assert page.drawn() == {} and page.value("vehicle-count") == "0"
            else:
                page.open_all()
                assert len(page.drawn()) == len(CHARTS)
                assert all(d["bars"] > 0 and d["visible"] == d["bars"] for d in page.drawn().values())
                assert '<b>"Depot"</b>' in page.page.inner_text("#table-value-by-depot")  # shown as written


@needs_chromium
def test_the_page_reads_on_a_phone_and_prints(fleet_db, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", "--db", fleet_db, "--out", str(out)]) == 0
    with chromium() as visit:
        for width in (PHONE, DESKTOP):
            page = visit(out, width)
            assert page.errors == [] and [m for m in page.console if m[0] in ("error", "warning")] == [], width
            for opened in (False, True):  # as it opens, then every collapsed part opened
                if opened:
                    page.open_all()
                seen = page.layout()
                # Nothing wider than the screen, no table scrolling inside itself, every row on screen, no chart
                # label past its chart.
                assert seen["scroll_width"] <= width and seen["too_wide"] == [] and seen["labels_cut"] == [], seen
                assert seen["inner_scrolls"] == [] and seen["hidden_cells"] == 0, seen
            assert [r[0] for r in page.rows("table-value-by-make")] == ["Ford", "Honda", "(unknown)", "BMW"]
            assert len(page.rows("table-changes")) == 2 and len(page.rows("table-changes-info")) == 1
            if width == PHONE:  # a row is a card of labelled values, the trade-in value among them
                assert page.page.eval_on_selector("#table-value-by-make tbody td:last-child", """td => [
                    getComputedStyle(td, "::before").content, td.innerText]""") == ['"trade-in"', "$25,000"]
        check_print(visit(out, A4))
