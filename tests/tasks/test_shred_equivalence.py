"""Shredding in SQL (sql/shred/) gives the rows the result models give, table by table.

The corpus: every per-VIN dataset's answers from the sandbox over a real socket (many VINs of several
makes and countries, with no-data, failing and retried ones), journalled as a chunk journals them, plus
odd answers a real service sends (numbers as text, "$25,400", "Unlimited", missing sections, ISO dates,
flags as words). The models' rows are today's landing path (the journal's chunk result through
tasks/land/landing.py's frames); the SQL's are `tasks.shred.shred` over the same staged rows.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest

from fleet_data.connectors import RetryPolicy, Settings
from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.fetch.enrich import fetch_chunk
from fleet_data.tasks.staging.journal import AnswerJournal, Journal, read_journal
from fleet_data.tasks.land.landing import DATA_FRAMES
from fleet_data.tasks.land.shred import TABLES, shred
from fleet_data.tasks.ingest.vins import check_digit

RUN = "20260101T000000Z-shred"
PREFIXES = ["1HGCM8263?A", "1FTFW1ET?DF", "5YJ3E1EA?KF", "2T1BURHE?FC", "3VWDX7AJ?BM", "WBA3A5C5?CF",
            "JTDKB20U?73", "KMHDU46D?8U"]
MAGIC = ["1HGCM82633A000404", "1HGCM82633A000500", "1HGCM82633A000502"]
QUICK_RETRIES = RetryPolicy(initial_backoff=0.001, max_backoff=0.01, max_retry_after=0.01)
# JSON text columns: the same values, whatever the spacing (json.dumps and DuckDB's to_json space differently).
JSON_COLUMNS = {"ownership_records": ("vehicle", "owners")}


def corpus_vins(n: int = 240) -> list[str]:
    rng = random.Random(13)
    vins = []
    for i in range(n):
        stem = PREFIXES[i % len(PREFIXES)].replace("?", "0") + f"{rng.randrange(1, 999_999):06d}"
        vins.append(stem[:8] + (check_digit(stem) or "0") + stem[9:])
    return vins + MAGIC


ROWS = [{"vin": v, "state": ["CA", "TX", "ON", None][i % 4], "mileage": 10_000 + 997 * i,
         "mileage_unit": "mi", "condition": ["clean", None][i % 2]} for i, v in enumerate(corpus_vins())]
AT = datetime(2026, 3, 1, 23, 30, tzinfo=timezone.utc)
ODD: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {  # (body, request) per dataset
    "specs": [
        ({"input": {"vin": "X"}, "attributes": {"year": "2019", "make": 17, "doors": "4.0", "engine_cylinders": "V6",
                                                 "vid": 12345, "transmission": True},
          "colors": [{"category": "Exterior", "name": None}, {}], "equipment": {"ABS": 1, "Seats": "Leather", "Note": None},
          "warranties": [{"type": "Basic", "miles": "36,000", "months": 36}, {"type": "Rust", "miles": "Unlimited",
                                                                             "months": "72"}]}, {}),
        ({"attributes": {}}, {}),
        ({"success": True}, {}),
    ],
    "market_value": [
        ({"retail": "$25,400", "trade_in": " 18,000 ", "msrp": 31000, "loan_value": "n/a", "model_year": "2018",
          "whole_clean": {"base": "12000", "mileage": -300, "adjusted": "11,700"},
          "retail_avg": {"base_retail_avg": 15000, "base": 1, "regional_retail_avg": None},
          "trade_in_rough": None, "auction_values": None,
          "mileage_list": [{"model_year": 2018, "range_begin": "0", "range_end": "10000.5", "clean": "1,000"}],
          "add_deduct_list": [{"uoc": 42, "name": "Sunroof", "auto": False}],
          # A month twice (the last wins), dates that name no month, values that are no number, items that are
          # no object: skipped.
          "trade_in_values": [{"date": "2024-05-01T00:00:00Z", "value": "12,000"}, {"date": "2024-05-15", "value": 11000},
                              {"date": "soon", "value": 1}, {"date": "2024-13-01", "value": 1}, {"value": 5}, 7,
                              {"date": "2024-06", "value": "n/a"}, {"date": " 2024-07-01", "value": "$9,500"},
                              {"date": 202408, "value": 3}, {"date": "2024-09-01", "value": True}]},
         {"state": None, "mileage": None, "mileage_unit": None, "condition": None}),
        ({"auction_values": {"low_auction_value": "9,000", "date_range": 2024}},
         {"state": "WA", "mileage": 88000, "condition": "rough"}),
    ],
    "history": [
        ({"brandsRecordCount": "2", "vinChanged": "no",
          "brandsInformation": [{"brand": "SALVAGE", "state": "TX"}, {"name": "FLOOD", "b": 1.5}, {"code": ""},
                                {"brand_name": "SALVAGE"}],
          "historyInformation": [{"odometer": 12000, "date": "2021-01-01", "z": None, "a": True}]}, {}),
        ({}, {}),
    ],
    "lien_theft": [
        ({"year": "2016", "make": "Ford", "events": [{"event": "Lien", "details_list": ["a", 2, None]}, {}]}, {}),
        ({"events": []}, {}),
    ],
    "recall_details": [
        ({"data": {"recalls": [{"nhtsa_campaign_number": "21V123000", "park_it": "yes", "park_outside": 0,
                                "report_received_date": "2021-07-04"},
                               {"nhtsa_campaign_number": "", "summary": "skipped"},
                               {"nhtsa_campaign_number": 19123, "report_received_date": "13/12/2019"}]}}, {}),
        ({"data": {"recall_count": "5", "recalls": []}}, {}),
        ({}, {}),
    ],
    "ownership": [
        ({"vin": "X", "owners": [{"first_name": "Ann", "age": 44, "phones": [{"number": 5551234, "dnc": "true"}],
                                  "emails": [], "vehicle_history": [{"year": "2011", "make": "Kia"}]}]}, {}),
        ({"vehicle": {"make": "Ford", "year": "2019", "doors": 4}, "owners": []}, {}),
    ],
}


@pytest.fixture(scope="module")
def sandbox():
    with run_sandbox(SandboxConfig()) as sb:
        yield sb


async def staged(sandbox, dataset: str, directory: Path) -> Journal:
    """The chunk's journal from the sandbox, plus a journal of odd answers, as one staged table."""
    key = "test_enterprise" if dataset == "ownership" else f"shred_{dataset}"
    settings = Settings(api_key=key, base_url=sandbox.url, retry=QUICK_RETRIES)
    with AnswerJournal.create(directory, RUN, dataset, secrets=(key,)) as journal:
        await fetch_chunk(dataset, ROWS, calls=Calls(settings=settings, concurrency=16), journal=journal)
    with AnswerJournal.create(directory, RUN, dataset) as odd:
        for i, (body, request) in enumerate(ODD[dataset]):
            odd.answer(None, f"ODD{i:014d}", "found", AT + timedelta(seconds=i), body=body, request=request)
    fetched = read_journal(journal.path)
    table = pa.concat_tables([fetched.table, read_journal(odd.path).table])
    return Journal(journal.path, RUN, dataset, table)


def normalised(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    for column in JSON_COLUMNS.get(table, ()):
        frame = frame.with_columns(pl.col(column).map_elements(lambda t: json.dumps(json.loads(t), sort_keys=True),
                                                               return_dtype=pl.String))
    return frame.sort([c for c in frame.columns if not frame.schema[c].is_nested()], nulls_last=True)


@pytest.mark.parametrize("dataset", list(TABLES))
async def test_sql_shredding_gives_the_rows_the_models_give(sandbox, tmp_path, dataset):
    journal = await staged(sandbox, dataset, tmp_path)
    result = journal.chunk_result()
    assert not [f for f in result.failed if f["status"] == 200]  # every answer of the corpus is one the models take
    assert len(result.found) > 50 and (result.no_data or dataset == "ownership")

    by_models = DATA_FRAMES[dataset](result)
    by_sql = shred(dataset, journal.table)
    assert list(by_sql) == list(by_models)
    for table, expected in by_models.items():
        got = pl.from_arrow(by_sql[table])
        assert isinstance(got, pl.DataFrame)
        assert got.schema == expected.schema, table
        assert got.height == expected.height and got.height > 0, table
        left, right = normalised(table, got), normalised(table, expected)
        for column in expected.columns:  # column by column, so a difference names its column
            assert left[column].to_list() == right[column].to_list(), (table, column)
