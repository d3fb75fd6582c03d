"""Shredding in SQL (sql/shred/) gives the rows the result models give, table by table: per-VIN answers, a recall
batch's results and a model's campaign listing.

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

from fleet_data.connectors import AsyncVehicleDataClient, RetryPolicy, Settings
from fleet_data.connectors.errors import MalformedResponseError
from fleet_data.connectors.models import BatchResults, RecallsByModel
from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.fetch.enrich import fetch_chunk
from fleet_data.tasks.staging.journal import AnswerJournal, Journal, read_journal
from fleet_data.tasks.land.landing import DATA_FRAMES
from fleet_data.tasks.land.frames import RECALL_CHECK_SCHEMA, recall_checks_from_batch, recalls_frame
from fleet_data.tasks.land.shred import TABLES, shred, shred_batch_results, shred_model_listing
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


# -- answers about no single VIN: a recall batch's results, a model's campaign listing -------------------------
# Items the models take (numbers as text, flags as words, fields absent: false and 0), then items they refuse:
# the models refuse the whole answer for one of them, the SQL only that item (its VIN ends as one the batch ended
# without, a retryable failure: tasks/recalls/batches.py).
ODD_ITEMS = [{"vin": "ODD00000000000001", "hasRecalls": "yes", "recallCount": "2"},
             {"vin": "ODD00000000000002", "hasRecalls": 0, "recallCount": 0.0},
             {"vin": "ODD00000000000003"}, {"vin": "ODD00000000000004", "hasRecalls": True, "extra": [1]}]
REFUSED_ITEMS = [{"vin": None, "hasRecalls": True, "recallCount": 1}, {"vin": "ODD00000000000005", "recallCount": None},
                 {"vin": "ODD00000000000006", "hasRecalls": "perhaps"}, {"vin": "ODD00000000000007", "recallCount": "n/a"},
                 {"hasRecalls": False}, "ODD00000000000008", 7]


def _frame(table: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def _same_rows(got: pl.DataFrame, expected: pl.DataFrame, table: str) -> None:
    assert got.schema == expected.schema, table
    assert got.height == expected.height and got.height > 0, table
    left, right = normalised(table, got), normalised(table, expected)
    for column in expected.columns:
        assert left[column].to_list() == right[column].to_list(), (table, column)


async def _batch_answer(sandbox) -> tuple[str, bytes]:
    settings = Settings(api_key="shred_batch", base_url=sandbox.url, retry=QUICK_RETRIES)
    async with AsyncVehicleDataClient(settings) as client:
        job = await client.submit_recalls_batch(corpus_vins())
        await client.wait_for_recalls_batch(job.batchId, poll_interval=0.05)
        _, body = await client.recalls_batch_results_raw(job.batchId)
    return job.batchId, body


async def test_a_batchs_results_shred_into_the_checks_the_models_give(sandbox):
    batch_id, body = await _batch_answer(sandbox)
    answer = json.loads(body)
    answer["data"]["results"] += ODD_ITEMS
    body = json.dumps(answer).encode()
    items = BatchResults.from_payload(json.loads(body)).data.results
    assert sum(i.recallCount > 0 for i in items) > 20 and sum(i.recallCount == 0 for i in items) > 20

    by_sql = shred_batch_results(body, batch_id, AT, lossless=False)  # flags as booleans polars reads
    _same_rows(_frame(by_sql["recall_checks"]), recall_checks_from_batch(items, batch_id, AT), "recall_checks")
    assert _frame(by_sql["fetch_status"]).sort("vin").to_dicts() == [
        {"vin": i.vin, "dataset": "recalls", "outcome": "found", "fetched_at": AT} for i in sorted(items, key=lambda i: i.vin)]
    (raw,) = by_sql["raw_responses"].to_pylist()
    assert json.loads(raw["body"]) == answer and raw["batch_id"] == batch_id and raw["vin"] is None
    assert json.loads(raw["request_params"]) == {"batchId": batch_id}


async def test_an_item_the_models_refuse_costs_only_its_own_check(sandbox):
    """The models refuse a whole answer for one bad item (every VIN of the batch failed); the SQL skips that item."""
    batch_id, body = await _batch_answer(sandbox)
    answer = json.loads(body)
    taken = len(answer["data"]["results"])
    answer["data"]["results"] += REFUSED_ITEMS
    answer["data"]["job"]["batchToken"] = "bt_secret"  # a token the service echoes is not stored
    with pytest.raises(MalformedResponseError):
        BatchResults.from_payload(answer, "recalls-batch-results")

    by_sql = shred_batch_results(json.dumps(answer), batch_id, AT)
    assert by_sql["recall_checks"].num_rows == taken
    assert not {f"ODD0000000000000{n}" for n in (5, 6, 7, 8)} & set(by_sql["recall_checks"].column("vin").to_pylist())
    assert "bt_secret" not in by_sql["raw_responses"].column("body")[0].as_py()


def test_results_stored_by_earlier_versions_shred_alike():
    """raw_responses held `{job, results}` (no `data` envelope) before the results were stored as sent."""
    items = [{"vin": "1HGCM82633A004352", "hasRecalls": True, "recallCount": 2}]
    old = shred_batch_results(json.dumps({"job": {"batchId": "rb_1"}, "results": items}), "rb_1", AT)
    new = shred_batch_results(json.dumps({"success": True, "data": {"job": {"batchId": "rb_1"}, "results": items}}),
                              "rb_1", AT)
    assert old["recall_checks"].to_pylist() == new["recall_checks"].to_pylist() != []


async def test_a_model_listing_shreds_into_the_campaigns_and_checks_the_models_give(sandbox):
    settings = Settings(api_key="shred_listing", base_url=sandbox.url, retry=QUICK_RETRIES)
    asked = {"year": 2015, "make": "Honda", "model": "Accord"}
    async with AsyncVehicleDataClient(settings) as client:
        answer = await client.request("recalls-ymm", asked, raw=True)
    assert answer.raw is not None
    pool = RecallsByModel.from_payload(answer.body).data.recalls
    assert len(pool) > 1
    vins = corpus_vins(5)

    by_sql = shred_model_listing(answer.raw, vins, asked, AT, lossless=False)
    _same_rows(_frame(by_sql["recalls"]), recalls_frame([(v, pool, AT) for v in vins], matched_by="model"), "recalls")
    checks = pl.DataFrame([{"vin": v, "checked_via": "model", "batch_id": None, "has_recalls": True,
                            "recall_count": len(pool), "campaigns_listed": True, "fetched_at": AT} for v in vins],
                          schema=RECALL_CHECK_SCHEMA, orient="row")
    _same_rows(_frame(by_sql["recall_checks"]), checks, "recall_checks")
    (raw,) = by_sql["raw_responses"].to_pylist()
    assert json.loads(raw["body"]) == json.loads(answer.raw) and json.loads(raw["request_params"]) == asked
    assert raw["endpoint"] == "/v1/recalls-ymm" and raw["vin"] is None
