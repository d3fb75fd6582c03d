"""Turn what a chunk fetched into table frames and land them in one transaction.

The data tables' rows come from the staged answers (the journal's Arrow rows: the redacted bytes the
service sent, per VIN) shredded in DuckDB SQL (tasks/land/shred.py, `sql/shred/<table>.sql`); the pydantic
models are the library's contract, and `DATA_FRAMES` (their rows) is what the equivalence test holds
the SQL to.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Mapping

import orjson
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tasks.land import frames as staging
from tasks.datasets import REGISTRY, Live
from tasks.datasets import DATASETS
from tasks.staging.chunk import ChunkResult
from tasks.land.shred import BOOKKEEPING, TABLES, shred, shred_tables
from tasks.store.database import Database

FETCH_STATUS_SCHEMA: staging.Schema = {"vin": pl.String, "dataset": pl.String, "outcome": pl.String, "fetched_at": staging.TS}
OWNERSHIP_SCHEMA: staging.Schema = {"vin": pl.String, "owner_count": pl.Int32, "vehicle": pl.String, "owners": pl.String,
                                    "fetched_at": staging.TS}

# Which table a dataset's answers land in, and how the models stage them (the contract the SQL is held to).
DATA_FRAMES = {
    "specs": lambda r: {"specs": staging.specs_frame(r.found)},
    "market_value": lambda r: {"market_values": staging.market_values_frame(r.found, r.requests),
                               "trade_in_history": staging.trade_in_history_frame(r.found, r.requests)},
    "history": lambda r: {"history_reports": staging.history_frame(r.found)},
    "lien_theft": lambda r: {"lien_theft_events": staging.lien_theft_frame(r.found)},
    "ownership": lambda r: {"ownership_records": ownership_frame(r.found)},
    # Campaigns first, then the check that closes what it no longer lists: new and closed campaigns are
    # then told apart as they land (sql/changes/recalls.sql, recall_checks.landed.sql).
    "recall_details": lambda r: {
        "recalls": staging.recalls_frame([(vin, ans.data.recalls, at) for vin, ans, at in r.found]),
        "recall_checks": staging.recall_checks_from_reports(r.found, r.no_data),
    },
}
# A fetch under another name than its dataset's (recall details complete a recall check that the batch
# already recorded as fresh): its failures and raw answers are the dataset's, its freshness is not its own.
FAILURE_DATASET: Mapping[str, str] = Live(lambda: {d.fetched_as: d.name for d in REGISTRY.values()
                                                   if d.fetched_as != d.name})


def ownership_frame(found: list[tuple[str, Any, datetime]]) -> pl.DataFrame:
    rows = [
        {"vin": vin, "owner_count": len(r.owners),
         "vehicle": json.dumps(r.vehicle.model_dump(mode="json") if r.vehicle else None),
         "owners": json.dumps([o.model_dump(mode="json") for o in r.owners]), "fetched_at": at}
        for vin, r, at in found
    ]
    return pl.DataFrame(rows, schema=OWNERSHIP_SCHEMA, orient="row") if rows else pl.DataFrame(schema=OWNERSHIP_SCHEMA)


def fetch_status_frame(dataset: str, found: list[tuple[str, datetime]], no_data: list[tuple[str, datetime]]) -> pl.DataFrame:
    rows = [{"vin": v, "dataset": dataset, "outcome": "found", "fetched_at": at} for v, at in found]
    rows += [{"vin": v, "dataset": dataset, "outcome": "no_data", "fetched_at": at} for v, at in no_data]
    return pl.DataFrame(rows, schema=FETCH_STATUS_SCHEMA, orient="row") if rows else pl.DataFrame(schema=FETCH_STATUS_SCHEMA)


STAGED_SCHEMA = pa.schema([("vin", pa.string()), ("outcome", pa.string()), ("answered_at", pa.timestamp("us", tz="UTC")),
                           ("request", pa.string()), ("body", pa.binary())])


def body_bytes(answer: Any) -> bytes:
    """An answer as the JSON bytes staged for shredding: bytes as received, else a model's or a dict's JSON."""
    if isinstance(answer, (bytes, bytearray, memoryview)):
        return bytes(answer)
    body = answer.raw if hasattr(answer, "raw") else answer
    try:
        return orjson.dumps(body)
    except TypeError:  # an integer beyond 64 bits, a key that is not a string
        return json.dumps(body, default=str).encode()


def staged_answers(result: ChunkResult) -> pa.Table:
    """The chunk's final answers in the journal's staged shape (the columns shredding reads)."""
    vins = [vin for vin, _, _ in result.found] + [vin for vin, _ in result.no_data]
    outcomes = ["found"] * len(result.found) + ["no_data"] * len(result.no_data)
    times = [at for _, _, at in result.found] + [at for _, at in result.no_data]
    requests = [json.dumps(result.requests[vin], default=str) if result.requests.get(vin) else None
                for vin, _, _ in result.found] + [None] * len(result.no_data)
    bodies = [body_bytes(answer) for _, answer, _ in result.found] + [None] * len(result.no_data)
    return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip((vins, outcomes, times, requests, bodies),
                                                                        STAGED_SCHEMA)], schema=STAGED_SCHEMA)


def _raw_params(dataset: str) -> dict[str, str]:
    return {"dataset": FAILURE_DATASET.get(dataset, dataset), "endpoint": DATASETS[dataset].endpoint}


def data_frames(result: ChunkResult) -> dict[str, pl.DataFrame]:
    """The data tables' rows of a chunk: its staged answers shredded in SQL."""
    return {table: _polars(rows) for table, rows in shred(result.dataset, staged_answers(result)).items()}


def _polars(table: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def land_enrichment(db: Database, run_id: str, result: ChunkResult) -> dict[str, int]:
    """Land a chunk: its data, freshness, failures, calls and raw answers, all or nothing."""
    frames: dict[str, pl.DataFrame | pa.Table] = dict(data_frames(result))
    if result.dataset in FAILURE_DATASET:
        failures = [{**f, "dataset": FAILURE_DATASET[result.dataset]} for f in result.failed]
    else:
        failures = result.failed
        frames["fetch_status"] = fetch_status_frame(
            result.dataset, [(vin, at) for vin, _, at in result.found], result.no_data
        )
    frames["failures"] = staging.failures_frame(failures)
    frames["api_calls"] = staging.api_calls_frame(result.calls)
    raw = shred_tables(staged_answers(result), ["raw_responses"], **_raw_params(result.dataset))
    frames["raw_responses"] = _polars(raw["raw_responses"])
    return db.land_chunk(frames, run_id)


def worth_landing(answers: pa.Table) -> bool:
    """Whether staged answers hold anything to land: a call paid for, or a failure (a chunk stopped before
    its first call holds only pending VINs)."""
    if not answers.num_rows:
        return False
    return bool(pc.any(pc.is_valid(answers.column("call_id"))).as_py()
                or pc.any(pc.equal(answers.column("outcome"), "failed")).as_py())


def land_answers(db: Database, run_id: str, dataset: str, answers: pa.Table) -> dict[str, int]:
    """Land a chunk's staged answers (a journal's rows, tasks/staging/journal.py) set-based, all or nothing.

    What `land_enrichment` lands from a chunk's result, built by SQL over the Arrow rows as they are
    (`sql/shred/`): the data tables, then freshness, failures, calls and raw answers; no Python per answer.
    """
    tables = [*TABLES[dataset], *(t for t in BOOKKEEPING if t != "fetch_status" or dataset not in FAILURE_DATASET)]
    frames: dict[str, pl.DataFrame | pa.Table] = {
        table: _polars(rows) for table, rows in shred_tables(answers, tables, **_raw_params(dataset)).items()}
    return db.land_chunk(frames, run_id)
