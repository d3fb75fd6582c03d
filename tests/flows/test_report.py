"""`fleet report`: one HTML file, the fleet at a glance.

On databases built here row by row, the figures it shows are the rows' figures, an empty database gives a
page that says so, bad input gets one line and exit code 2 (no service, no Prefect). In a real browser
(Debian's headless Chromium, driven over CDP by playwright; `.ci/run` installs it where missing): a refresh
of the sample fleet against the sandbox writes the report next to the lake, and opened from disk it loads
with no console error and no request but the file itself, every chart is drawn, the figures it shows equal
the database's, and its tables sort.
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

from fleet_data.flows.cli import main
from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import RefreshOptions
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
            -- an earlier run's brand that V1's latest report no longer carries: nothing to do
            ('run-0', $v1, 'history', 'new_title_brand', 'Junk', 'high', '[]', '["Junk"]', $now, $now)""",
                              {"v1": V1, "v2": V2, "v3": V3, "now": NOW})
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


def test_report_shows_the_databases_figures(fleet_db, tmp_path, capsys):
    out = tmp_path / "out" / "fleet.html"
    assert main(["report", "--db", fleet_db, "--out", str(out)]) == 0
    todo_csv = out.with_name("fleet.todo.csv")
    assert capsys.readouterr().out.strip() == (f"wrote {out} (4 vehicles, 3 open recalls, 2 to park) and the to-do list "
                                               f"{todo_csv} (6 rows)")
    page = out.read_text(encoding="utf-8")
    # Current states: V2's lien was released and its theft recovered; V4's lien holds and it was not recovered.
    assert shown(page) == {"vehicle-count": "4", "total-value": "38000.5", "open-recalls": "3", "vehicles-to-park": "2",
                           "stolen-now": "1", "active-liens": "1", "title-branded": "1", "mileage-conflicts": "1"}
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
    # The value trend carries January's valuation of V1 forward until today's.
    specs = {s["for"]: json.loads(s["spec"]) for s in (m.groupdict() for m in re.finditer(
        r'<script type="application/json" class="chart-spec" data-for="(?P<for>[a-z-]+)">(?P<spec>.*?)</script>', page))}
    assert set(specs) == {"chart-value-by-depot", "chart-value-by-make", "chart-recalls-by-component",
                          "chart-title-lien-theft", "chart-freshness", "chart-units-by-month"}
    # The title/lien chart shows states now, not events (a recovery or a release is no bar of its own).
    assert [(t["y"], t["x"]) for t in specs["chart-title-lien-theft"]["data"]] == [
        (["Salvage"], [1]), (["stolen, not recovered", "active lien"], [1, 1])]
    by_depot = {t["name"]: dict(zip(t["x"], t["y"])) for t in specs["chart-value-by-depot"]["data"]}
    # In trade-in value: the service's six months of history carry no retail (tasks/outputs/report.py).
    assert by_depot["North"]["2026-01"] == 7000.0 and by_depot["North"][f"{NOW:%Y-%m}"] == 31000.0


def test_the_report_opens_with_what_needs_doing_and_what_changed(fleet_db, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", "--db", fleet_db, "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert page.index('id="todo"') < page.index('id="changes"') < page.index('id="value"') < page.index('id="recalls"')
    todo = [(r[0], r[1], html.unescape(r[5])) for r in table_rows(page, "table-todo")]
    assert todo == [
        ("park now", "U1", "24V001 AIR BAGS: do not drive"),
        ("park outside", "U2", "23V100 ENGINE: park outside, away from buildings"),
        ("stolen", "U4", "theft reported on 2025-05-01 in Austin, TX (APD); not recovered"),
        ("active lien", "U4", "lien held by First Bank since 2024-01-09; not released"),
        ("title brand", "U3", "title newly branded Salvage"),
        ("mileage conflict", "U3", "fleet file says 5,384 mi, history read 94,141 mi on 2024-03-02: 88,757 mi more; "
                                   "not valued yet (valuations ask with the reading)")]
    # What the run changed, most severe first, from the change feed.
    assert [(r[0], r[1], r[5], r[6]) for r in table_rows(page, "table-changes")] == [
        ("park now", "U1", "new recall", "24V001 AIR BAGS"), ("high", "U3", "new title brand", "Salvage"),
        ("info", "U2", "value moved", "retail $40,000 → $30,000 (-25.0%)")]
    assert "Run run-1 (refresh, completed" in page and "3 changes on 3 vehicles" in page


def test_the_to_do_list_is_written_beside_the_report_for_spreadsheets(fleet_db, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", "--db", fleet_db, "--out", str(out)]) == 0
    csv = tmp_path / "todo.csv"
    assert csv.read_bytes().startswith(b"\xef\xbb\xbf")  # the BOM: Excel reads the names as UTF-8
    rows = pl.read_csv(csv, infer_schema=False)
    assert rows.columns == ["category", "unit_number", "vin", "plate", "fleet", "year", "make", "model", "reason", "since"]
    page_rows = table_rows(out.read_text(encoding="utf-8"), "table-todo")
    assert [(r["category"], r["unit_number"], r["reason"]) for r in rows.iter_rows(named=True)] == [
        (r[0], r[1], html.unescape(r[5])) for r in page_rows]
    assert rows.filter(pl.col("unit_number") == "U4")["fleet"].to_list() == ["'" + FORMULA] * 2  # text, not a formula
    assert rows.filter(pl.col("category") == "mileage conflict")["since"].to_list() == ["2024-03-02"]


def test_names_from_the_fleet_file_cannot_break_out_of_the_page(fleet_db, tmp_path):
    out = tmp_path / "r.html"
    assert main(["report", "--db", fleet_db, "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "window.pwned" in page  # the name is shown...
    assert "<script>window.pwned" not in page  # ...as text and as JSON, never as markup


def test_an_empty_database_gives_a_page_that_says_so(tmp_path):
    db = empty_db(tmp_path / "fleet.duckdb")
    out = tmp_path / "report.html"
    assert main(["report", "--db", db, "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert shown(page) == {"vehicle-count": "0", "total-value": "", "open-recalls": "0", "vehicles-to-park": "0",
                           "stolen-now": "0", "active-liens": "0", "title-branded": "0", "mileage-conflicts": "0"}
    assert (tmp_path / "todo.csv").read_text(encoding="utf-8-sig").splitlines() == [
        "category,unit_number,vin,plate,fleet,year,make,model,reason,since"]
    for said in ("Nothing to do", "No finished refresh yet", "No valuation yet", "No open recall",
                 "No title brand, lien or theft record", "No vehicle on the roster yet", "No call made yet", "no run yet"):
        assert said in page
    assert 'class="chart-spec"' not in page


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

    def drawn(self) -> dict[str, dict[str, int]]:
        """Per chart: plotly's SVG layers and the bars inside them with a visible size."""
        return self.page.evaluate("""() => Object.fromEntries(Array.from(document.querySelectorAll("div.chart")).map(
            c => [c.id, {svg: c.querySelectorAll("svg.main-svg").length,
                         bars: Array.from(c.querySelectorAll("g.point path")).filter(p => {
                             const b = p.getBBox(); return b.width > 0 && b.height > 0; }).length}]))""")

    def column(self, table_id: str, index: int) -> list[str]:
        return self.page.eval_on_selector_all(f"#{table_id} tbody tr", f"rows => rows.map(r => r.cells[{index}].textContent)")

    def layout(self) -> dict[str, Any]:
        """What a reader at this width sees: sideways overflow, inner scrolls, table cells hidden or cut off, covered
        captions."""
        return self.page.evaluate("""() => {
            const width = window.innerWidth, d = document.documentElement;
            const wide = Array.from(document.querySelectorAll("main *, header *")).filter(e => {
                const r = e.getBoundingClientRect(); return r.width > 0 && r.right > width + 1; });
            const scrolls = Array.from(document.querySelectorAll("main *")).filter(e => {
                const s = getComputedStyle(e);
                return (e.scrollHeight > e.clientHeight + 1 && /auto|scroll|hidden/.test(s.overflowY)
                        && !e.closest(".chart")) || (e.scrollWidth > e.clientWidth + 1 && /auto|scroll/.test(s.overflowX)); });
            const hidden = Array.from(document.querySelectorAll("table tbody tr, table tbody td")).filter(r => {
                const b = r.getBoundingClientRect(); return b.height === 0 || b.width === 0 || b.right > width + 1; });
            const cramped = Array.from(document.querySelectorAll(".card, .card *")).filter(e => e.scrollWidth > e.clientWidth + 1);
            const bars = Array.from(document.querySelectorAll(".modebar-container")).map(m => m.getBoundingClientRect());
            const covered = Array.from(document.querySelectorAll("figcaption")).filter(c => {
                const a = c.getBoundingClientRect();
                return bars.some(b => b.width > 0 && a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom); });
            const name = e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && e.className.baseVal === undefined ? "." + e.className : "");
            return {width: width, scroll_width: Math.max(d.scrollWidth, document.body.scrollWidth),
                    too_wide: wide.slice(0, 5).map(name).concat(cramped.map(name)), inner_scrolls: scrolls.map(name),
                    hidden_cells: hidden.length,
                    legend_scrolls: Array.from(document.querySelectorAll(".chart .legend .scrollbar")).filter(b => {
                        const r = b.getBoundingClientRect(); return r.height > 0 && r.width > 0; }).length, covered_captions: covered.map(c => c.textContent)};
        }""")

    def rows(self, table_id: str) -> list[list[str]]:
        return self.page.eval_on_selector_all(f"#{table_id} tbody tr",
                                              "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText))")

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


def refresh_twice(sandbox: Any, fleet: str, db_path: str, lake: Path) -> tuple[dict[str, Any], str, str]:
    """Two refreshes; between them the service says a vehicle must be parked, and another got a title brand."""
    first = refresh_fleet([fleet], RefreshOptions(db=db_path, lake=str(lake), chunk_size=50))
    assert first["status"] == "completed"
    with open_published(db_path) as db:  # two vehicles the service knows
        park_vin, brand_vin = [r[0] for r in db.connection.execute(
            "SELECT vin FROM fetch_status WHERE dataset = 'history' AND outcome = 'found' INTERSECT "
            "SELECT vin FROM fetch_status WHERE dataset = 'specs' AND outcome = 'found' ORDER BY vin LIMIT 2").fetchall()]
    sandbox.set_vehicle(park_vin, recalls=[PARK_IT])
    sandbox.set_vehicle(brand_vin, title_brands=["Flood"])
    summary = refresh_fleet([fleet], RefreshOptions(db=db_path, lake=str(lake), chunk_size=50, force=True))
    assert summary["status"] == "completed"
    return summary, park_vin, brand_vin


def counted(db_path: str, run_id: str) -> dict[str, Any]:
    """What analysts read, counted here from the tables themselves."""
    with open_published(db_path) as db:
        def one(sql: str, **params: Any) -> Any:
            return db.connection.execute(sql, params).fetchall()[0][0]

        park = "FROM recalls SEMI JOIN vehicles USING (vin) WHERE closed_at IS NULL AND (park_it OR park_outside)"
        return {
            "vehicles": one("SELECT count(*) FROM vehicles"),
            "total": one("""SELECT sum(retail) FROM (SELECT vin, retail FROM market_values QUALIFY row_number() OVER
                            (PARTITION BY vin ORDER BY valued_on DESC, fetched_at DESC) = 1) SEMI JOIN vehicles USING (vin)"""),
            "open_recalls": one("SELECT count(*) FROM recalls SEMI JOIN vehicles USING (vin) WHERE closed_at IS NULL"),
            "to_park": one(f"SELECT count(DISTINCT vin) {park}"), "park_rows": one(f"SELECT count(*) {park}"),
            "changes": one("SELECT count(*) FROM changes WHERE run_id = $run", run=run_id),
            "makes": one("SELECT count(DISTINCT coalesce(make, '(unknown)')) FROM vehicle_overview"),
        }


def check_reads_at(page: Visit, width: int, todo: pl.DataFrame, n: dict[str, Any], park_vin: str, brand_vin: str) -> None:
    """At this width: no error, no request, nothing too wide or scrolling inside, to-do and changes all shown."""
    assert page.errors == [] and [m for m in page.console if m[0] in ("error", "warning")] == [], width
    assert page.requests == [page.url]  # the file itself, nothing else: plotly.js and the data are inside it
    seen = page.layout()
    assert seen["scroll_width"] <= width and seen["too_wide"] == [], seen
    assert seen["inner_scrolls"] == [] and seen["hidden_cells"] == 0 and seen["legend_scrolls"] == 0, seen
    # The to-do list first, with a reason on every row; then the run's changes; every make listed.
    todo_rows = page.rows("table-todo")
    assert len(todo_rows) == todo.height and all(r[5] for r in todo_rows)
    assert any(r[2] == park_vin and "26V999000 AIR BAGS: do not drive" in r[5] for r in todo_rows)
    change_rows = page.rows("table-changes")
    assert len(change_rows) == n["changes"] and change_rows[0][0] == "park now"
    assert any(r[2] == park_vin and r[5:] == ["new recall", "26V999000 AIR BAGS"] for r in change_rows)
    assert any(r[2] == brand_vin and r[5:] == ["new title brand", "Flood"] for r in change_rows)
    assert len(page.rows("table-value-by-make")) == n["makes"]


@needs_chromium
@pytest.mark.usefixtures("prefect_server")
def test_every_refresh_writes_the_report_and_chromium_shows_the_databases_figures(service, fleet_file, db_path, tmp_path,
                                                                                   capsys):
    lake = tmp_path / "lake"
    summary, park_vin, brand_vin = refresh_twice(service(), fleet_file(150), db_path, lake)
    report, todo_csv = lake / "report.html", lake / "todo.csv"
    assert summary["report"] == str(report) and report.is_file()
    assert summary["todo"] == str(todo_csv) and todo_csv.is_file()
    artifact = asyncio.run(latest_summary_artifact())
    assert f"[report.html]({report.resolve().as_uri()})" in artifact and f"[todo.csv]({todo_csv.resolve().as_uri()})" in artifact
    capsys.readouterr()
    print_run_summary(summary, as_json=False)  # what `fleet refresh` prints last: where the page and the list are
    assert f"report: {report}; to-do list: {todo_csv}" in capsys.readouterr().out

    n = counted(db_path, summary["run_id"])
    assert n["vehicles"] == 150 and n["total"] > 0 and n["open_recalls"] > 0 and n["to_park"] > 0  # it tests something
    assert summary["changes"]["total"] == n["changes"] >= 2
    todo = pl.read_csv(todo_csv, infer_schema=False)
    assert {("park now", park_vin), ("title brand", brand_vin)} <= set(todo.select("category", "vin").iter_rows())
    with chromium() as visit:
        for width in (PHONE, DESKTOP):
            page = visit(report, width)
            check_reads_at(page, width, todo, n, park_vin, brand_vin)
            name = "phone" if width == PHONE else "desktop"
            page.page.screenshot(path=str(Path(SCREENSHOTS or tmp_path) / f"report-{name}.png"))
            page.page.evaluate("document.getElementById('todo').scrollIntoView()")
            page.page.screenshot(path=str(Path(SCREENSHOTS or tmp_path) / f"report-{name}-todo.png"))
        printed = visit(report, A4)
        printed.page.emulate_media(media="print")
        printed.page.wait_for_timeout(200)  # the charts refit to the paper's width
        seen = printed.layout()
        assert seen["scroll_width"] <= A4 and seen["inner_scrolls"] == [] and seen["hidden_cells"] == 0, seen
        drawn = page.drawn()
        assert set(drawn) == set(CHARTS)
        assert all(d["svg"] > 0 and d["bars"] > 0 for d in drawn.values()), drawn

        assert (int(page.value("vehicle-count")), int(page.value("open-recalls")), int(page.value("vehicles-to-park"))) == (
            n["vehicles"], n["open_recalls"], n["to_park"])
        assert float(page.value("total-value")) == pytest.approx(float(n["total"]), rel=1e-12)  # summed in another order
        assert (page.text("vehicle-count"), page.text("total-value"), page.text("vehicles-to-park")) == (
            f"{n['vehicles']:,}", f"${n['total']:,.0f}", f"{n['to_park']:,}")
        assert len(page.column("table-vehicles-to-park", 0)) == n["park_rows"]
        check_sorting(page)


def check_sorting(page: Visit) -> None:
    """Tables sort: by a text column, then by a number column (numerically, not as text), then the other way."""
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
                assert all(d["svg"] > 0 and d["bars"] > 0 for d in page.drawn().values()) and len(page.drawn()) == len(CHARTS)
                assert '<b>"Depot"</b>' in page.page.inner_text("#table-value-by-depot")  # shown as written


@needs_chromium
def test_the_page_reads_on_a_phone_and_prints(fleet_db, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", "--db", fleet_db, "--out", str(out)]) == 0
    with chromium() as visit:
        for width in (PHONE, DESKTOP):
            page = visit(out, width)
            assert page.errors == [] and [m for m in page.console if m[0] in ("error", "warning")] == [], width
            seen = page.layout()
            # Nothing wider than the screen, no table scrolling inside itself, every row on screen, no caption
            # under plotly's toolbar (hovered, so it shows).
            assert seen["scroll_width"] <= width and seen["too_wide"] == [], seen
            assert seen["inner_scrolls"] == [] and seen["hidden_cells"] == 0, seen
            page.page.hover("#chart-value-by-depot")
            assert page.layout()["covered_captions"] == [], width
            assert [r[0] for r in page.rows("table-value-by-make")] == ["Ford", "Honda", "(unknown)", "BMW"]
            assert len(page.rows("table-todo")) == 6 and len(page.rows("table-changes")) == 3
            if width == PHONE:  # a row is a card of labelled values, the trade-in value among them
                assert page.page.eval_on_selector("#table-value-by-make tbody td:last-child", """td => [
                    getComputedStyle(td, "::before").content, td.innerText]""") == ['"trade-in"', "$25,000"]
        # On paper: the same, without the toolbar.
        page = visit(out, A4)
        page.page.emulate_media(media="print")
        page.page.wait_for_timeout(200)  # the charts refit to the paper's width
        seen = page.layout()
        assert seen["scroll_width"] <= A4 and seen["inner_scrolls"] == [] and seen["hidden_cells"] == 0, seen
        assert page.page.evaluate("""() => Array.from(document.querySelectorAll(".modebar-container"))
            .every(m => getComputedStyle(m).display === "none")""")
