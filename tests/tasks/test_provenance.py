"""An answer is fresh only for the service that gave it and when not dated in the future; the plan says why it asks
again. What a database holds decides whether a run may start: the embedded sandbox never lands among another
service's answers, and a clock behind the last run is refused. Built row by row, planned by the planner itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from fleet_data.connectors.config import EMBEDDED_SANDBOX, Settings, embedded_sandbox, service_name
from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.outputs.summary import plan_text
from fleet_data.tasks.plan import provenance
from fleet_data.tasks.plan.due import DueRule, make_plan
from fleet_data.tasks.settings import CLOCK_TOLERANCE
from fleet_data.tasks.store.database import SQL_DIR, Database, open_database
from fleet_data.tasks.store.published import publish_file, read_only_view

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
REAL = "https://api.carsxe.com"
STANDING = "http://127.0.0.1:9100"
VINS = ["1FA6P8TH7F2332882", "1GCUYDED9CV181149", "2T1BURHE3FW785032", "3VWDP7AJ7GD918670", "5YJ3E1EA9JH754124",
        "5YJYGDEE0J7648039"]  # valid, sorted: the plan lists due VINs in this order


def answered(db, run: str, rows: list[tuple[str, datetime]]) -> None:
    frame = pl.DataFrame([{"vin": v, "dataset": "specs", "outcome": "found", "fetched_at": at} for v, at in rows],
                         schema={"vin": pl.String, "dataset": pl.String, "outcome": pl.String, "fetched_at": staging.TS})
    db.land("fetch_status", frame, run)


@pytest.fixture
def held(tmp_path):
    """Specs answers of three services (and of none recorded), fresh by the window; two dated ahead of the clock."""
    db = open_database(tmp_path / "fleet.duckdb")
    db.land("vehicles", pl.DataFrame({"vin": VINS}), "roster")
    db.start_run("refresh", [], {}, run_id="real", started_at=NOW - timedelta(days=2), service=REAL)
    db.start_run("refresh", [], {}, run_id="sandbox", started_at=NOW - timedelta(days=1), service=EMBEDDED_SANDBOX)
    answered(db, "real", [(VINS[0], NOW - timedelta(days=2)), (VINS[3], NOW + timedelta(days=400)),
                          (VINS[4], NOW + CLOCK_TOLERANCE - timedelta(seconds=30))])
    answered(db, "sandbox", [(VINS[1], NOW - timedelta(days=1))])
    answered(db, "before-services", [(VINS[2], NOW - timedelta(days=3))])  # a run not held: service unknown
    yield db
    db.close()


def test_an_answer_is_fresh_only_for_its_service_and_not_when_dated_ahead(held, tmp_path):
    plan = make_plan(held, "roster", ["specs"], tmp_path / "due", rule=DueRule(now=NOW, service=REAL))
    specs = plan.datasets["specs"]
    due = pl.read_parquet(specs.path)["vin"].to_list()
    # VINS[1]: the sandbox's; VINS[3]: dated 400 days ahead; VINS[5]: never answered. VINS[2] (unknown service)
    # counts as the run's, VINS[4] is within the clocks' tolerance.
    assert due == [VINS[1], VINS[3], VINS[5]]
    assert (specs.other_service_due, specs.future_due, specs.skipped_fresh) == (1, 1, 3)
    assert plan.service == REAL and plan.other_services == [EMBEDDED_SANDBOX]
    text = plan_text(plan)
    assert text.startswith(f"Plan: 3 units from {REAL}")
    assert "(1 from another service, 1 dated in the future)" in text
    assert f"another service: 1 answers from {EMBEDDED_SANDBOX} are never fresh for {REAL}: asked again" in text
    assert "dated in the future: 1 answers dated more than 5 minutes ahead of this clock" in text

    sandbox = make_plan(held, "roster", ["specs"], tmp_path / "due2", rule=DueRule(now=NOW, service=EMBEDDED_SANDBOX))
    assert sandbox.datasets["specs"].other_service_due == 3  # the real service's three (the one dated ahead too)
    # The SQL form of the rule (sql/queries/due_vins.sql) says the same.
    rows = held.query("due_vins", run_id="roster", dataset="specs", force=False, fresh_after=NOW - timedelta(days=365),
                      no_data_after=None, future_after=NOW + CLOCK_TOLERANCE, service=REAL)
    assert rows["vin"].to_list() == due


def test_a_plan_from_a_file_published_before_services_were_recorded(tmp_path):
    """A dry run (and the plan `fleet refresh` prints first) reads the published file, which an upgrade leaves as it
    was until the next run publishes: its answers are of an unknown service, and count as the run's."""
    from fleet_data.tasks.ingest.fleet_files import read_fleet

    before = tmp_path / "migrations"
    before.mkdir()
    for path in sorted((SQL_DIR / "migrations").glob("*.sql")):
        if int(path.name[:4]) <= 11:
            (before / path.name).write_bytes(path.read_bytes())
    csv = tmp_path / "fleet.csv"
    csv.write_text("vin\n" + "\n".join(VINS[:2]) + "\n")
    db_path = tmp_path / "old.duckdb"
    old = Database(db_path, migrations_dir=before, views_dir=tmp_path / "no_views")
    old.connection.execute("INSERT INTO fetch_status VALUES ($vin, 'specs', 'found', 'r0', $at)",
                           {"vin": VINS[0], "at": datetime.now(UTC)})
    old.close()
    with read_only_view(db_path) as view:
        plan = make_plan(view, "dry", ["specs"], tmp_path / "due", roster=read_fleet([str(csv)]).roster,
                         rule=DueRule(service=REAL))
    assert (plan.datasets["specs"].due, plan.datasets["specs"].skipped_fresh) == (1, 1)
    held = provenance.read_published(db_path)
    assert held.services == {None: 1} and held.last_run is None


def test_the_embedded_sandbox_lands_only_among_its_own_answers():
    mine = provenance.Provenance({EMBEDDED_SANDBOX: 40})
    assert provenance.sandbox_refusal(mine, EMBEDDED_SANDBOX, "fleet.duckdb") is None
    assert provenance.sandbox_refusal(provenance.Provenance(), EMBEDDED_SANDBOX, "fleet.duckdb") is None
    for services, named in (({REAL: 3, EMBEDDED_SANDBOX: 1}, REAL), ({None: 3}, "an unknown service (landed before")):
        refused = provenance.sandbox_refusal(provenance.Provenance(services), EMBEDDED_SANDBOX, "fleet.duckdb")
        assert refused and named in refused and "\n" not in refused and "VDS_API_KEY" in refused
    assert provenance.sandbox_refusal(provenance.Provenance({REAL: 3}), STANDING, "fleet.duckdb") is None


def test_a_clock_behind_the_last_run_is_refused_unless_said_right():
    last = {"run_id": "r9", "started_at": NOW, "recorded_at": NOW + timedelta(minutes=3)}
    held = provenance.Provenance({REAL: 1}, last)
    assert provenance.clock_refusal(held, "fleet.duckdb", NOW) is None  # within the tolerance
    refused = provenance.clock_refusal(held, "fleet.duckdb", NOW - timedelta(days=400))
    assert refused and "400 days behind the last run in fleet.duckdb (r9" in refused and "--allow-clock-behind" in refused
    assert provenance.refusal(held, "fleet.duckdb", REAL, allow_clock_behind=True, now=NOW - timedelta(days=400)) is None
    assert provenance.clock_refusal(provenance.Provenance(), "fleet.duckdb", NOW - timedelta(days=400)) is None


def test_the_last_run_is_the_last_to_arrive_whatever_its_clock(tmp_path):
    path = tmp_path / "fleet.duckdb"
    with open_database(path) as db:
        db.start_run("refresh", [], {}, run_id="ahead", started_at=NOW + timedelta(days=400), service=REAL)
        db.start_run("refresh", [], {}, run_id="said-right", started_at=NOW, service=REAL)  # --allow-clock-behind
        db.finish_run("said-right", "completed", finished_at=NOW + timedelta(minutes=1))
    publish_file(path)
    held = provenance.read_published(path)
    assert held.last_run["run_id"] == "said-right"
    assert provenance.clock_refusal(held, path, NOW + timedelta(hours=1)) is None  # no override needed again


def test_a_service_is_named_without_its_credentials():
    assert service_name("HTTPS://User:s3cret@API.carsxe.com:8443/v1/?key=abc#frag") == "https://api.carsxe.com:8443/v1"
    assert service_name("https://api.carsxe.com/") == REAL
    assert Settings().service == EMBEDDED_SANDBOX  # nothing configured: commands call the embedded sandbox
    assert Settings(api_key="k").service == REAL
    with embedded_sandbox("http://127.0.0.1:41234"):
        assert Settings(api_key="k", base_url="http://127.0.0.1:41234").service == EMBEDDED_SANDBOX
    assert Settings(api_key="k", base_url="http://127.0.0.1:41234").service == "http://127.0.0.1:41234"
