"""Turn what a chunk fetched into table frames and land them in one transaction.

The data tables' rows come from the staged answers (the journal's Arrow rows: the redacted bytes the
service sent, per VIN) shredded in DuckDB SQL (tasks/land/shred.py, `sql/shred/<table>.sql`); the pydantic
models are the library's contract, and `DATA_FRAMES` (their rows) is what the equivalence test holds
the SQL to. The fetch task shreds its chunk itself and stages the typed tables beside its journal
(tasks/staging/staged_chunk.py); the writer then only upserts them (`land_answers`). A journal staged without them
(a killed run's, `land_journals`) is shredded here, by the same function.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Iterator

import orjson
import polars as pl
import pyarrow as pa

from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.staging import area as staging_store
from fleet_data.tasks.staging import staged_chunk
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.staging.journal import worth_landing
from fleet_data.tasks.land.shred import (BOOKKEEPING, FAILURE_DATASET, bookkeeping_params, shred, shred_tables,
                                         staged_tables)
from fleet_data.tasks.staging.staged_chunk import StagedTables
from fleet_data.tasks.store.database import Database

__all__ = ["FAILURE_DATASET", "worth_landing"]  # where callers have found them

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
    raw = shred_tables(staged_answers(result), ["raw_responses"], bookkeeping_params(result.dataset))
    frames["raw_responses"] = _polars(raw["raw_responses"])
    return db.land_chunk(frames, run_id)


def land_answers(db: Database, run_id: str, dataset: str, answers: pa.Table | StagedTables) -> dict[str, int]:
    """Land a chunk's answers set-based, all or nothing: its typed tables as staged by the fetch task, or a
    journal's rows (tasks/staging/journal.py), shredded here first (`staged_tables`, what the fetch task runs).

    What `land_enrichment` lands from a chunk's result: the data tables, then freshness, failures, calls and
    raw answers; no Python per answer.
    """
    staged = answers if isinstance(answers, StagedTables) else StagedTables(dataset, staged_tables(dataset, answers))
    return db.land_chunk(dict(staged.tables), run_id)


def land_together(db: Database, run_id: str, chunks: list[tuple[str, pa.Table | StagedTables]]) -> dict[str, int]:
    """Land several chunks' answers in ONE transaction, all or nothing: each table's rows of every chunk at once.

    A transaction costs about 30 statements and a COMMIT whatever its size, so the chunks that came back while the
    last landing ran land together (flows/refresh.py). Their VINs are their datasets' own (a due list names a
    VIN once), so landing them together leaves what landing them one by one leaves. The data tables land before
    the bookkeeping, as in one chunk: freshness and the change feed compare with the answers landed.
    """
    staged = [answers if isinstance(answers, StagedTables) else StagedTables(dataset, staged_tables(dataset, answers))
              for dataset, answers in chunks]
    if len(staged) == 1:
        return db.land_chunk(dict(staged[0].tables), run_id)
    parts: dict[str, list[pa.Table]] = {}
    for chunk in staged:
        for table, rows in chunk.tables.items():
            parts.setdefault(table, []).append(rows)
    order = [t for t in parts if t not in BOOKKEEPING] + [t for t in BOOKKEEPING if t in parts]
    return db.land_chunk({t: pa.concat_tables(parts[t], promote_options="default") for t in order}, run_id)


def calls_not_recorded(db: Database, calls: pl.DataFrame) -> pl.DataFrame:
    """The `api_calls` rows of `calls` the ledger does not hold yet (a journal replayed never rewrites a call)."""
    if not calls.height:
        return calls
    recorded = db.query("recorded_call_ids", call_ids=calls["call_id"].to_list())["call_id"]
    return calls.filter(~pl.col("call_id").is_in(recorded.implode()))


@contextmanager
def staged_at(location: str) -> Iterator[StagedTables | None]:
    """The typed tables the fetch staged beside the journal at `location` (a path or a URL), None if it staged
    none; land them inside the block (a remote file is downloaded for it)."""
    typed = staged_chunk.location(location)
    if not staging_store.exists(typed):
        yield None
        return
    with staging_store.opened(typed) as path:
        yield staged_chunk.read(path)


def remove_staged(location: str) -> None:
    """The chunk at `location` has landed: its typed tables go, then its journal (the journal last: a kill
    between the two leaves a journal, which lands again harmlessly)."""
    staging_store.remove(staged_chunk.location(location))
    staging_store.remove(location)
