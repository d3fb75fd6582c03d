"""`--fresh` takes the durations `--retry-window` takes, and the other way round: one grammar (issue 30: `--fresh`
refused the seconds `--retry-window` accepted)."""

from __future__ import annotations

import json

import pytest

from fleet_data.flows.cli import main
from fleet_data.tasks.plan.due import age_text, parse_freshness
from fleet_data.tasks.settings import duration

from .conftest import sample_rows

SAME = [("90", 90), ("90s", 90), ("1.5m", 90), ("3m", 180), ("12h", 43_200), ("2d", 172_800), (" 30D ", 2_592_000)]


@pytest.mark.parametrize("text,seconds", SAME)
def test_both_options_read_a_duration_alike(text, seconds):
    assert duration(text) == seconds
    assert parse_freshness({"specs": text})["specs"].total_seconds() == seconds


@pytest.mark.parametrize("text", ["2weeks", "", "-5m", "nan", "inf", "d"])
def test_both_options_refuse_what_is_not_a_duration(text):
    with pytest.raises(ValueError, match="not a duration"):
        duration(text)
    with pytest.raises(ValueError, match="use a number of seconds, or one with s, m, h or d"):
        parse_freshness({"specs": text})


def test_a_window_in_seconds_is_shown_as_written():
    assert [age_text(parse_freshness({"no_data": t})["no_data"]) for t in ("45", "90", "3600", "7d")] == [
        "45s", "90s", "1h", "7d"]


def test_fresh_in_seconds_is_accepted_on_the_command_line(tmp_path, capsys):
    fleet = tmp_path / "fleet.csv"
    sample_rows(3).write_csv(fleet)
    argv = ["refresh", str(fleet), "--db", str(tmp_path / "fleet.duckdb"), "--lake", "", "--dry-run", "--json"]
    assert main([*argv, "--fresh", "specs=30", "--retry-window", "30"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "planned"
