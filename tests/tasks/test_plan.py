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
