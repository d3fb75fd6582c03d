"""Freshness windows and chunking of the plan."""

from datetime import timedelta

import pytest

from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.plan.due import DEFAULT_FRESHNESS, DatasetPlan, DueRule, parse_freshness


def test_freshness_overrides_parse_and_keep_the_other_defaults():
    windows = parse_freshness({"market_value": "14d", "recalls": "12h", "specs": "90m"})
    assert windows["market_value"] == timedelta(days=14)
    assert windows["recalls"] == timedelta(hours=12)
    assert windows["specs"] == timedelta(minutes=90)
    assert windows["history"] == DEFAULT_FRESHNESS["history"]


@pytest.mark.parametrize(("overrides", "message"), [
    ({"colour": "1d"}, "unknown dataset"),
    ({"recalls": "weekly"}, "use a number"),
    ({"recalls": "7w"}, "use a number"),
])
def test_bad_freshness_is_refused_clearly(overrides, message):
    with pytest.raises(ValueError, match=message):
        parse_freshness(overrides)


def test_chunks_cover_every_due_vin_once():
    plan = DatasetPlan("specs", "specs", roster=1200, due=1050, skipped_fresh=150, estimated_units=1050, path="x")
    chunks = plan.chunks(500)
    assert chunks == [(0, 500), (500, 500), (1000, 50)]
    assert DatasetPlan("specs", "specs", 10, 0, 10, 0, None).chunks(500) == []


def test_no_data_answers_are_asked_again_after_their_own_shorter_window(store, sandbox, settings, tmp_path):
    """The service caches "not found" for about a day and bills no 404: a year-long specs window is too long."""
    import asyncio
    from datetime import datetime, timezone

    import polars as pl

    from fleet_data.tasks.fetch.enrich import fetch_chunk
    from fleet_data.tasks.land.landing import land_enrichment
    from fleet_data.tasks.plan.due import make_plan
    from fleet_data.tasks.outputs.summary import plan_text

    found, gone = "1HGCM82633A004352", "1HGCM82633A004363"  # data; no data anywhere
    store.land("vehicles", pl.DataFrame({"vin": [found, gone]}), "r1")
    result = asyncio.run(fetch_chunk("specs", [{"vin": found}, {"vin": gone}], calls=Calls(settings=settings())))
    assert [v for v, _ in result.no_data] == [gone]
    land_enrichment(store, "r1", result)
    now = datetime.now(timezone.utc)

    def plan(days: float, **fresh: str):
        return make_plan(store, "r1", ["specs"], tmp_path / "due",
                         rule=DueRule(freshness=parse_freshness(fresh), now=now + timedelta(days=days)))

    assert plan(6).datasets["specs"].due == 0  # both fresh within a week
    later = plan(8)
    specs = later.datasets["specs"]
    assert (specs.due, specs.no_data_due, specs.skipped_fresh) == (1, 1, 1)
    assert pl.read_parquet(specs.path)["vin"].to_list() == [gone]
    assert "1 no data before" in plan_text(later) and "no data: asked again after 7d" in plan_text(later)
    assert plan(8, no_data="10d").datasets["specs"].due == 0  # --fresh no_data=10d
    assert plan(2, no_data="1d").datasets["specs"].due == 1
    # A dataset whose own window is shorter than the no-data one keeps its own for both.
    assert plan(2, specs="1d").datasets["specs"].due == 2


def test_the_no_data_window_is_parsed_like_the_others():
    assert parse_freshness({})["no_data"] == timedelta(days=7)
    assert parse_freshness({"no_data": "3d"})["no_data"] == timedelta(days=3)


def test_vehicles_a_dataset_cannot_answer_for_are_not_applicable_not_due(tmp_path):
    import polars as pl

    from fleet_data.tasks.plan.due import ALL_DATASETS, make_plan
    from fleet_data.tasks.store.database import open_database

    na, europe, in_texas, in_ontario = "1HGCM82633A004352", "WBA3A5C50DF123456", "JTDKARFU4HL133505", "2T1BURHE0JC012345"
    with open_database(tmp_path / "fleet.duckdb") as db:
        run = db.start_run("refresh", ["fleet.csv"])
        db.land("vehicles", pl.DataFrame({"vin": [na, europe, in_texas, in_ontario], "state": [None, None, "TX", "ON"]}), run)
        plan = make_plan(db, run, ALL_DATASETS, tmp_path / "staging")
        counts = {d: (p.not_applicable, p.due) for d, p in plan.datasets.items()}
        assert counts == {"specs": (0, 4), "market_value": (1, 3), "history": (2, 2), "lien_theft": (2, 2),
                          "recalls": (1, 3), "ownership": (0, 4)}
        for d in plan.datasets.values():
            assert d.roster == d.not_applicable + d.skipped_fresh + d.due
        assert pl.read_parquet(plan.datasets["lien_theft"].path)["vin"].to_list() == [na, in_texas]
        assert europe not in pl.read_parquet(plan.datasets["recalls"].path)["vin"].to_list()
        assert plan.estimated_units == 4 + 3 + 2 + 2 + 3 + 4


def test_a_plan_from_the_roster_as_read_equals_the_plan_from_the_landed_roster(tmp_path):
    """A dry run may plan from the fleet as read, without landing its roster first: same counts, same due lists."""
    from datetime import datetime, timezone

    import polars as pl

    from fleet_data.tasks.plan.due import ALL_DATASETS, make_plan
    from fleet_data.tasks.store.database import open_database

    fleet = tmp_path / "fleet.csv"
    fleet.write_text("vin,state,mileage,country\n1HGCM82633A004352,,12000,\nWBA3A5C50DF123456,,,DE\n"
                     "JTDKARFU4HL133505,TX,5 km,\n2T1BURHE0JC012345,ON,,\n1HGCM82633A004363,CA,7,\n")
    from fleet_data.tasks.ingest.fleet_files import read_fleet

    roster = read_fleet(fleet).roster
    now = datetime.now(timezone.utc)
    with open_database(tmp_path / "fleet.duckdb") as db:
        old = db.start_run("refresh", ["fleet.csv"])  # one VIN answered specs and market value before
        db.land("vehicles", roster.head(1), old)
        db.land("fetch_status", pl.DataFrame({"vin": [roster["vin"][0]] * 2, "dataset": ["specs", "market_value"],
                                              "outcome": ["found", "no_data"]}), old)
        run = db.start_run("refresh", ["fleet.csv"])
        unlanded = make_plan(db, run, ALL_DATASETS, tmp_path / "a", roster=roster, rule=DueRule(now=now))
        db.land("vehicles", roster, run)
        landed = make_plan(db, run, ALL_DATASETS, tmp_path / "b", rule=DueRule(now=now))
    assert landed.datasets["specs"].skipped_fresh == 1  # the test means something: one VIN is fresh
    for name, expected in landed.datasets.items():
        got = unlanded.datasets[name]
        assert {**vars(got), "path": None} == {**vars(expected), "path": None}, name
        if expected.path:
            assert pl.read_parquet(got.path).equals(pl.read_parquet(expected.path)), name


def test_a_canadian_mileage_without_a_unit_is_counted_and_named_not_converted(tmp_path):
    """Issue 26: a Canadian row whose file says neither km nor mi was taken as miles, converted and sent."""
    import polars as pl

    from fleet_data.tasks.datasets import valuation_request
    from fleet_data.tasks.ingest.fleet_files import read_fleet
    from fleet_data.tasks.outputs.summary import notes
    from fleet_data.tasks.run.summary import RunSummary
    from fleet_data.tasks.plan.due import make_plan, read_slice
    from fleet_data.tasks.store.database import open_database

    on, ca, km, tx = "2T1BURHE3JC012345", "2T1BURHE5JC012346", "2T1BURHE7JC012347", "JTDKARFU4HL133505"
    fleet = tmp_path / "fleet.csv"
    fleet.write_text(f"vin,state,country,mileage\n{on},ON,,147702\n{ca},,Canada,80000\n{km},QC,,\"52,000 km\"\n"
                     f"{tx},TX,,40000\n")
    roster = read_fleet(fleet).roster
    with open_database(tmp_path / "fleet.duckdb") as db:
        run = db.start_run("refresh", ["fleet.csv"])
        db.land("vehicles", roster, run)
        plan = make_plan(db, run, ["market_value"], tmp_path / "staging")
        valued = plan.datasets["market_value"]
        asked = {r["vin"]: valuation_request(r) for r in read_slice(valued.path)}
    assert (valued.unit_unknown, sorted(valued.unit_unknown_vins)) == (2, sorted([on, ca]))
    assert [(asked[v]["mileage"], asked[v]["country"]) for v in (on, ca, km, tx)] == [
        (None, "CA"), (None, "CA"), (52000, "CA"), (40000, "US")]  # unknown: not sent; known: as the spec wants
    summary = RunSummary.start(run, {"rows_in": 4, "valid": 4}, plan).as_json()
    assert summary["mileage_unit_unknown"] == {"dataset": "market_value", "vehicles": 2, "vins": valued.unit_unknown_vins}
    [line] = [n for n in notes(summary) if "without their mileage" in n]
    assert on in line and ca in line and line.startswith("market_value: 2 Canadian vehicles")
    assert pl.read_parquet(valued.path).filter(pl.col("vin") == tx)["mileage_unit"].to_list() == [None]  # never assumed
