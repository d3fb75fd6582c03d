"""Freshness windows and chunking of the plan."""

from datetime import timedelta

import pytest

from tasks.plan import DEFAULT_FRESHNESS, DatasetPlan, parse_freshness


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


def test_vehicles_a_dataset_cannot_answer_for_are_not_applicable_not_due(tmp_path):
    import polars as pl

    from tasks.plan import ALL_DATASETS, make_plan
    from tasks.storage import open_database

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
