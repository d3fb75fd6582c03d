"""Which datasets can answer for which vehicle: the market rule and the datasets' declarations."""

import polars as pl
import pytest

from fleet_data.tasks.fetch.enrich import DATASETS
from fleet_data.tasks.ingest.markets import applies, in_scope, with_market
from fleet_data.tasks.plan.due import applicability_table, declaration

NA, NA_BAD = "1HGCM82633A004352", "2T1BURHE0JC012345"
EUROPE = "WBA3A5C50DF123456"


def markets(rows: list[dict]) -> list[str]:
    frame = pl.DataFrame(rows, schema={"vin": pl.String, "state": pl.String, "country": pl.String,
                                       "specs_international": pl.Boolean})
    return with_market(frame)["market"].to_list()


def test_the_file_says_where_a_vehicle_is_registered_before_the_vin_does():
    assert markets([
        {"vin": NA},                                   # a North American VIN, country not given
        {"vin": EUROPE},                               # built for elsewhere, nothing else known
        {"vin": EUROPE, "state": "tx"},                # a German-built car registered in Texas is a US vehicle
        {"vin": EUROPE, "state": "ON"},                # ... in Ontario, a Canadian one
        {"vin": NA, "country": "Germany"},             # a US-built car registered in Germany is not
        {"vin": NA, "country": " mx "},
        {"vin": EUROPE, "country": "CA", "state": "NSW"},  # the country column wins over the state
        {"vin": EUROPE, "state": "NSW"},
        {"vin": EUROPE, "state": "??"},                # an unknown state says nothing
        {"vin": EUROPE, "specs_international": False},  # /specs decoded it as a US VIN: the service says so
        {"vin": EUROPE, "specs_international": True},
    ]) == ["north_america", "international", "US", "CA", "DE", "MX", "CA", "AU", "international",
           "north_america", "international"]


def test_a_frame_without_state_or_country_columns_goes_by_the_vin():
    frame = with_market(pl.DataFrame({"vin": [NA_BAD, EUROPE]}))
    assert frame["market"].to_list() == ["north_america", "international"]


@pytest.mark.parametrize(("market", "lien_theft", "history", "market_value", "recalls", "specs"), [
    ("US", True, True, True, True, True),
    ("north_america", True, True, True, True, True),
    ("CA", False, False, True, True, True),
    ("MX", False, False, False, True, True),
    ("DE", False, False, False, False, True),
    ("international", False, False, False, False, True),
])
def test_each_dataset_applies_where_the_spec_says_it_answers(market, lien_theft, history, market_value, recalls, specs):
    got = {name: applies(declaration(name).markets, market)
           for name in ("lien_theft", "history", "market_value", "recalls", "specs")}
    assert got == {"lien_theft": lien_theft, "history": history, "market_value": market_value,
                   "recalls": recalls, "specs": specs}


def test_in_scope_keeps_only_the_vehicles_a_dataset_applies_to():
    frame = with_market(pl.DataFrame({"vin": [NA, EUROPE, NA_BAD], "state": [None, None, "ON"]}))
    assert in_scope(frame, DATASETS["lien_theft"].markets)["vin"].to_list() == [NA]
    assert in_scope(frame, DATASETS["market_value"].markets)["vin"].to_list() == [NA, NA_BAD]
    assert in_scope(frame, DATASETS["specs"].markets)["vin"].to_list() == [NA, EUROPE, NA_BAD]


def test_the_readme_shows_the_table_the_declarations_make():
    from pathlib import Path

    readme = [line.strip() for line in (Path(__file__).resolve().parents[2] / "README.md").read_text().splitlines()]
    table = applicability_table().splitlines()
    assert table[0].startswith("| dataset |") and len(table) == 2 + 6
    start = readme.index(table[0])
    assert readme[start:start + len(table)] == table  # change a declaration, and this says to update the README
