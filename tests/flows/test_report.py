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

from flows.cli import main
from flows.refresh import refresh_fleet
from tasks.settings import RefreshOptions
from tasks.outputs.report import report_markdown, write_run_report
from tasks.store.database import open_database
from tasks.store.published import open_published, publish

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime.now(UTC)
V1, V2, V3, V4 = "1HGCM82633A004352", "1FTFW1E50KFA12345", "WBA3A5C51CF256651", "2T1BURHE0JC034461"
HOSTILE = '</script><script>window.pwned = 1</script><b>"Depot"</b>'  # a fleet column says anything


def build_fleet_db(path: Path) -> str:
    """Four vehicles: two valued, recalls (one park-it, one park-outside, one plain), a title brand, liens and theft."""
    db_path = str(path)
    with open_database(db_path) as db:
        db.start_run("refresh", ["fleet.csv"], run_id="run-1", started_at=NOW - timedelta(minutes=5))
        db.land("vehicles", pl.DataFrame({"vin": [V1, V2, V3, V4], "unit_number": ["U1", "U2", "U3", "U4"],
                                          "fleet": ["North", "North", HOSTILE, None]}), "run-1")
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
        db.land("history_reports", pl.DataFrame({"vin": [V3], "title_brands": [["Salvage"]], "brands_record_count": [1]}),
                "run-1")
        db.land("lien_theft_events", pl.DataFrame([
            {"vin": V2, "event_index": 0, "event": "Lien"}, {"vin": V2, "event_index": 1, "event": "Lien Release"},
            {"vin": V4, "event_index": 0, "event": "Theft"}]), "run-1")
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
    body = re.search(rf'<table class="sortable" id="{table_id}".*?<tbody>(.*?)</tbody>', page, re.DOTALL)
    assert body, f"no table {table_id}"
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", body.group(1))]


def test_report_shows_the_databases_figures(fleet_db, tmp_path, capsys):
    out = tmp_path / "out" / "fleet.html"
    assert main(["report", "--db", fleet_db, "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out} (4 vehicles, 3 open recalls, 2 to park)"
    page = out.read_text(encoding="utf-8")
    assert shown(page) == {"vehicle-count": "4", "total-value": "38000.5", "open-recalls": "3", "vehicles-to-park": "2",
                           "title-branded": "1", "theft-vehicles": "1", "lien-vehicles": "1"}
    assert "$38,000" in page  # rounded for people, exact in data-value
    # Today's value by depot: V1 and V2 in North; the hostile depot has a vehicle but no valuation.
    assert table_rows(page, "table-value-by-depot") == [
        ["North", "2", "2", "$38,000", "$31,000"], ["(none)", "1", "0", "", ""],
        [HOSTILE.replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;"), "1", "0", "", ""]]
    assert table_rows(page, "table-recalls-by-component") == [
        ["AIR BAGS", "1", "1", "0", "1", "0"], ["ENGINE", "1", "1", "0", "0", "1"], ["SERVICE BRAKES", "1", "1", "0", "0", "0"]]
    assert [(r[0], r[4], r[6]) for r in table_rows(page, "table-vehicles-to-park")] == [
        ("U1", "24V001", "park it"), ("U2", "23V100", "park outside")]
    assert [(r[0], r[4], r[5], r[6], r[7]) for r in table_rows(page, "table-flagged-vehicles")] == [
        ("U3", "Salvage", "0", "0", "0"), ("U4", "", "0", "0", "1"), ("U2", "", "1", "1", "0")]
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
    by_depot = {t["name"]: dict(zip(t["x"], t["y"])) for t in specs["chart-value-by-depot"]["data"]}
    assert by_depot["North"]["2026-01"] == 9000.0 and by_depot["North"][f"{NOW:%Y-%m}"] == 38000.5


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
                           "title-branded": "0", "theft-vehicles": "0", "lien-vehicles": "0"}
    for said in ("No valuation yet", "No open recall", "No title brand, lien or theft record", "No vehicle on the roster yet",
                 "No call made yet", "no run yet"):
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
    assert report_markdown(where, None) == f"\n\n**Fleet report**: [report.html]({where.as_uri()}) (`{where}`)"
    with open_published(fleet_db) as db:
        assert write_run_report(db, str(tmp_path / "fleet.duckdb"), None)[0] == tmp_path / "fleet.report.html"


# --- in Chromium ------------------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Skipped, saying why, where chromium is not installed; CI (.ci/run) installs it and requires it.
needs_chromium = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("FLEET_REQUIRE_CHROMIUM"),
                                    reason="Debian's chromium is not installed (apt-get install chromium; .ci/run does it)")
CHARTS = ("chart-value-by-depot", "chart-value-by-make", "chart-recalls-by-component", "chart-title-lien-theft",
          "chart-freshness", "chart-units-by-month")


@contextmanager
def chromium() -> Iterator[Callable[[Path], Visit]]:
    """`visit(path)` opens a page in the system's headless Chromium (nothing downloaded).

    Started only once a test's Prefect and asyncio work is over: playwright's sync API keeps an event
    loop running in this thread, where the refresh's tasks would then refuse to start theirs.
    """
    from playwright.sync_api import sync_playwright

    opened: list[Visit] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)

        def visit(path: Path) -> Visit:
            opened.append(Visit(browser, path))
            return opened[-1]

        try:
            yield visit
        finally:
            for page in opened:
                page.close()
            browser.close()


class Visit:
    """One page opened from disk, with every console message, page error and request it caused."""

    def __init__(self, browser: Any, path: Path):
        self.url = path.resolve().as_uri()
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
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


@needs_chromium
@pytest.mark.usefixtures("prefect_server")
def test_every_refresh_writes_the_report_and_chromium_shows_the_databases_figures(service, fleet_file, db_path, tmp_path):
    service()
    lake = tmp_path / "lake"
    summary = refresh_fleet([fleet_file(150)], RefreshOptions(db=db_path, lake=str(lake), chunk_size=50))
    assert summary["status"] == "completed"
    report = lake / "report.html"
    assert summary["report"] == str(report) and report.is_file()
    assert f"[report.html]({report.resolve().as_uri()})" in asyncio.run(latest_summary_artifact())

    with open_published(db_path) as db:  # what analysts read, counted here from the tables themselves
        def one(sql: str) -> Any:
            return db.connection.execute(sql).fetchall()[0][0]

        vehicles = one("SELECT count(*) FROM vehicles")
        total = one("""SELECT sum(retail) FROM (SELECT vin, retail FROM market_values QUALIFY row_number() OVER
                           (PARTITION BY vin ORDER BY valued_on DESC, fetched_at DESC) = 1) SEMI JOIN vehicles USING (vin)""")
        open_recalls = one("SELECT count(*) FROM recalls SEMI JOIN vehicles USING (vin) WHERE closed_at IS NULL")
        to_park = one("SELECT count(DISTINCT vin) FROM recalls SEMI JOIN vehicles USING (vin) "
                          "WHERE closed_at IS NULL AND (park_it OR park_outside)")
        park_rows = one("SELECT count(*) FROM recalls SEMI JOIN vehicles USING (vin) "
                            "WHERE closed_at IS NULL AND (park_it OR park_outside)")
    assert vehicles == 150 and total > 0 and open_recalls > 0 and to_park > 0  # a fleet that tests something
    with chromium() as visit:
        page = visit(report)
        assert page.errors == [] and [m for m in page.console if m[0] in ("error", "warning")] == []
        assert page.requests == [page.url]  # the file itself, nothing else: plotly.js and the data are inside it
        drawn = page.drawn()
        assert set(drawn) == set(CHARTS)
        assert all(d["svg"] > 0 and d["bars"] > 0 for d in drawn.values()), drawn

        assert (int(page.value("vehicle-count")), int(page.value("open-recalls")), int(page.value("vehicles-to-park"))) == (
            vehicles, open_recalls, to_park)
        assert float(page.value("total-value")) == pytest.approx(total, rel=1e-12)  # summed in another order
        assert (page.text("vehicle-count"), page.text("total-value"), page.text("vehicles-to-park")) == (
            f"{vehicles:,}", f"${total:,.0f}", f"{to_park:,}")
        assert len(page.column("table-vehicles-to-park", 0)) == park_rows

        # Tables sort: by a text column, then by a number column (numerically, not as text), then the other way.
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
