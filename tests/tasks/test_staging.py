"""Staged frames fit their tables, and a typed answer lands as the analyst will query it."""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal

import polars as pl
import pytest

from fleet_data.connectors import models as m
from fleet_data.tasks.land import landing
from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.store.database import open_database

AT = datetime(2026, 11, 1, 12, tzinfo=timezone.utc)
VIN = "1HGCM82633A004352"

SCHEMAS = {
    "specs": staging.SPECS_SCHEMA,
    "market_values": staging.MARKET_SCHEMA,
    "history_reports": staging.HISTORY_SCHEMA,
    "lien_theft_events": staging.LIEN_SCHEMA,
    "recall_checks": staging.RECALL_CHECK_SCHEMA,
    "recalls": staging.RECALL_SCHEMA,
    "api_calls": staging.CALL_SCHEMA,
    "failures": staging.FAILURE_SCHEMA,
    "raw_responses": staging.RAW_SCHEMA,
    "fetch_status": landing.FETCH_STATUS_SCHEMA,
    "ownership_records": landing.OWNERSHIP_SCHEMA,
}


@pytest.fixture
def db(tmp_path):
    with open_database(tmp_path / "fleet.duckdb") as database:
        yield database


@pytest.mark.parametrize("table", sorted(SCHEMAS))
def test_every_staged_column_exists_in_its_table(db, table):
    assert set(SCHEMAS[table]) <= set(db.columns(table)), set(SCHEMAS[table]) - set(db.columns(table))


def test_a_specs_answer_lands_nested_and_typed(db):
    answer = m.SpecsResult.from_payload({
        "success": True, "input": {"vin": VIN, "key": "secret"},
        "attributes": {"year": "2019", "make": "Honda", "model": "Accord", "doors": "4 doors", "engine_cylinders": "4"},
        "colors": [{"category": "Exterior", "name": "Crystal Black Pearl"}],
        "equipment": {"abs_brakes": "Std.", "air_conditioning": "Opt."},
        "warranties": [{"type": "Basic", "miles": "36,000", "months": "36"}, {"type": "Rust", "miles": "Unlimited", "months": "60"}],
    })
    db.land("specs", staging.specs_frame([(VIN, answer, AT)]), "r1")
    row = db.sql("SELECT year, doors, engine_cylinders, colors[1].name AS color, equipment, warranties FROM specs").row(0, named=True)
    assert row["year"] == 2019 and row["doors"] is None and row["engine_cylinders"] == 4
    assert row["color"] == "Crystal Black Pearl"
    assert {"name": "abs_brakes", "value": "Std."} in row["equipment"]
    assert row["warranties"] == [{"type": "Basic", "miles": 36000, "months": 36}, {"type": "Rust", "miles": None, "months": 60}]


def test_a_valuation_keeps_its_request_and_groups(db):
    answer = m.MarketValue.from_payload({
        "success": True, "retail": "25,400", "model_year": "2019", "make": "Honda",
        "retail_clean": {"base_retail_clean": 25000, "mileage_retail_clean": -600, "add_deduct_retail_clean": 0,
                         "regional_retail_clean": 150, "adjusted_retail_clean": 24550},
    })
    frame = staging.market_values_frame([(VIN, answer, AT)], {VIN: {"state": "CA", "mileage": 52000, "condition": "clean"}})
    db.land("market_values", frame, "r1")
    row = db.sql("SELECT state, mileage, condition, retail, valued_on, valuation_groups FROM market_values").row(0, named=True)
    assert (row["state"], row["mileage"], row["condition"], row["retail"]) == ("CA", 52000, "clean", 25400.0)
    assert str(row["valued_on"]) == "2026-11-01"
    assert row["valuation_groups"] == [{"kind": "retail", "tier": "clean", "base": 25000.0, "mileage": -600.0,
                                        "add_deduct": 0.0, "regional": 150.0, "adjusted": 24550.0}]


def test_a_valuation_lands_money_to_the_cent_and_its_publish_date_as_a_day(db):
    answers = [m.MarketValue.from_payload(body) for body in (
        {"retail": 25400.456, "trade_in": "$19,999.99", "publish_date": "2026-11-01T00:00:00.000Z"},
        {"retail": 1e15, "publish_date": "soon"},  # beyond DECIMAL(12,2), and no date: NULL, never a failed landing
    )]
    frame = staging.market_values_frame([(VIN, answers[0], AT), ("WBA3A5C56G0915102", answers[1], AT)], {})
    assert frame.schema["retail"] == pl.Decimal(12, 2) and frame.schema["publish_date"] == pl.Date
    db.land("market_values", frame, "r1")
    rows = db.sql("SELECT retail, trade_in, publish_date FROM market_values ORDER BY vin").rows()
    assert rows == [(Decimal("25400.46"), Decimal("19999.99"), date(2026, 11, 1)), (None, None, None)]


def test_empty_answers_stage_empty_frames_of_the_right_shape():
    assert staging.specs_frame([]).schema == pl.Schema(staging.SPECS_SCHEMA)
    assert landing.fetch_status_frame("specs", [], []).height == 0
