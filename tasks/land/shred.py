"""Staged answers -> typed table rows, in DuckDB SQL (`sql/shred/<table>.sql`), one statement per table.

The staged answers are the journal's rows (tasks/staging/journal.py SCHEMA: vin, outcome, answered_at, request,
body as the redacted JSON bytes the service sent). The SQL reads them as Arrow and gives the rows the
result models give (tests/tasks/test_shred_equivalence.py holds both to the same corpus), without a
model or a dict per answer. It runs on a connection of its own (in memory, one per thread), so shredding
never holds the store's writer lock; the store lands what it gives as it lands any frame.

`staged_tables` is what a fetch task stages beside its journal (tasks/staging/staged_chunk.py): every table the
chunk lands in, complete (raw answers hashed and redacted, JSON columns marked as JSON), so the single
writer only upserts them. A journal staged without them (a killed run's) is shredded by the lander, the
same function on the same rows.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import duckdb
import pyarrow as pa

from fleet_data.connectors import ENDPOINTS
from fleet_data.tasks.control import memory
from fleet_data.tasks.datasets import REGISTRY, Live, by_fetch_name
from fleet_data.tasks.datasets import table as table_declaration
from fleet_data.tasks.store.database import SQL_DIR, _bind, _statements

SHRED_DIR = SQL_DIR / "shred"
# The tables a dataset's answers land in, in landing order, by the name its fetch goes by: the
# registry's declarations (tasks/datasets.py), read at each use.
TABLES: Mapping[str, tuple[str, ...]] = Live(lambda: {d.fetched_as: tuple(t.name for t in d.tables)
                                                      for d in REGISTRY.values()})
# What a landing records besides the data, from the same staged rows (`sql/shred/_<table>.sql`): these
# read the journal's call columns too, so they need a journal's whole rows.
BOOKKEEPING = ("fetch_status", "failures", "api_calls", "raw_responses")
# A fetch under another name than its dataset's (recall details complete a recall check that the batch
# already recorded as fresh): its failures and raw answers are the dataset's, its freshness is not its own.
FAILURE_DATASET: Mapping[str, str] = Live(lambda: {d.fetched_as: d.name for d in REGISTRY.values()
                                                   if d.fetched_as != d.name})

# Answers about no single VIN, each shredded by its own statements (table -> file): a recall batch's results (one
# answer, a row per VIN it lists) and a model's campaign listing (staged once per VIN it settled).
BATCH_RESULTS = {"recall_checks": SHRED_DIR / "recall_batch" / "recall_checks.sql",
                 "fetch_status": SHRED_DIR / "recall_batch" / "fetch_status.sql",
                 "raw_responses": SHRED_DIR / "_raw_answer.sql"}
MODEL_LISTING = {"recalls": SHRED_DIR / "recalls.sql", "recall_checks": SHRED_DIR / "recalls_by_model" / "recall_checks.sql",
                 "raw_responses": SHRED_DIR / "_raw_answer.sql"}
# What a statement binds unless told otherwise: campaigns a VIN's own lookup listed.
DEFAULTS: Mapping[str, Any] = {"matched_by": "vin"}

_local = threading.local()


def _read(name: str) -> list[str]:
    return _statements((SHRED_DIR / name).read_text(encoding="utf-8"))


def _connection() -> duckdb.DuckDBPyConnection:
    con = getattr(_local, "connection", None)
    if con is None:
        con = duckdb.connect(":memory:", config=memory.duckdb_config(None))  # its threads bounded under `ulimit -v`
        con.execute("SET TimeZone = 'UTC'")
        # What a chunk's shredding freed goes back to the system past 8 MB, not past DuckDB's 128 MB (its
        # allocator keeps freed memory for the next query; the settings are the process's): with a connection per
        # fetch thread and 5,000-answer chunks, a 10,000 x 3 run peaked at 1,885-1,893 MiB, and 1,429-1,489 MiB with it.
        # But what the JSON functions free at once (their parse arenas, reset per vector) is kept up to 32 MB: handed
        # back past 8 MB, it was faulted in again at the next vector, 1.25 million page faults in that run; kept,
        # 0.7 million, 1.6 s less system CPU and 1.3 s less in all, for a peak of 1,690-1,980 MiB (docs/scale.md).
        con.execute("SET allocator_flush_threshold = '8MB'")
        con.execute("SET allocator_bulk_deallocation_flush_threshold = '32MB'")
        for statement in _read("_macros.sql"):
            con.execute(statement)
        _local.connection = con
        _local.selects = {}
    return con


def _select(path: Path) -> str:
    selects: dict[Path, str] = _local.selects
    if path not in selects:
        selects[path] = _statements(path.read_text(encoding="utf-8"))[0]
    return selects[path]


def _table_file(table: str) -> Path:
    return SHRED_DIR / f"_{table}.sql" if table in BOOKKEEPING else _shred_file(table)


def _shred_file(table: str) -> Path:
    """The SELECT a table's declaration names (sql/shred/<table>.sql unless it says otherwise)."""
    declared = table_declaration(table)
    return declared[1].shred if declared and declared[1].shred else SHRED_DIR / f"{table}.sql"


def shred(dataset: str, answers: pa.Table) -> dict[str, pa.Table]:
    """The rows of each table `dataset`'s staged `answers` land in (found answers; no-data ones for checks)."""
    return shred_tables(answers, TABLES[dataset])


def landing_tables(dataset: str) -> list[str]:
    """Every table a chunk of `dataset` (by its fetch name) lands in, in landing order: data, then bookkeeping."""
    return [*TABLES[dataset], *(t for t in BOOKKEEPING if t != "fetch_status" or dataset not in FAILURE_DATASET)]


def bookkeeping_params(dataset: str) -> dict[str, str]:
    """What the bookkeeping statements bind: the dataset failures and raw answers are recorded under, the endpoint
    as the service's path (what `api_calls.endpoint` holds, so the tables join on it)."""
    return {"dataset": FAILURE_DATASET.get(dataset, dataset), "endpoint": ENDPOINTS[by_fetch_name()[dataset].endpoint].path}


def staged_tables(dataset: str, answers: pa.Table) -> dict[str, pa.Table]:
    """Every table a chunk's journal rows land in, typed as the store's tables are, ready to upsert as they are.

    JSON columns come out as Arrow's JSON type (`arrow.json`), which DuckDB takes as JSON without parsing
    the text again: the bodies were validated once, here.
    """
    return shred_tables(answers, landing_tables(dataset), bookkeeping_params(dataset), lossless=True)


def shred_tables(answers: pa.Table, tables: Iterable[str], params: Mapping[str, Any] | None = None, *,
                 lossless: bool = False) -> dict[str, pa.Table]:
    """The rows of `tables` from staged `answers`, one statement per table over the Arrow rows as they are.

    `params`: what the bookkeeping statements bind (`dataset`, `endpoint`). `lossless`: JSON columns as
    `arrow.json` (DuckDB's type kept), else as plain strings (what polars reads).
    """
    return _shred(answers, {table: _table_file(table) for table in tables}, params, lossless=lossless)


def _shred(answers: pa.Table, files: Mapping[str, Path], params: Mapping[str, Any] | None, *,
           lossless: bool) -> dict[str, pa.Table]:
    con = _connection()
    con.register("answers", answers)
    if lossless:
        con.execute("SET arrow_lossless_conversion = true")
    bound = {**DEFAULTS, **(params or {})}
    try:
        for statement in _read("_answers.sql"):
            con.execute(statement)
        out = {}
        for table, path in files.items():
            select = _select(path)
            out[table] = con.sql(select, params=_bind(select, bound) or None).to_arrow_table()
        return out
    finally:
        con.execute("DROP TABLE IF EXISTS staged_found")  # the bodies' copy goes with the landing
        con.execute("RESET arrow_lossless_conversion")
        con.unregister("answers")


def shred_batch_results(body: bytes | str, batch_id: str, at: datetime, *, lossless: bool = True) -> dict[str, pa.Table]:
    """A recall batch's results answer (the bytes sent, redacted; or its stored text) -> its VINs' recall checks, their
    freshness and the answer's raw row, ready to land as they are (`lossless`: as `shred_tables`)."""
    params = {"dataset": "recalls", "endpoint": ENDPOINTS["recalls-batch-results"].path, "batch_id": batch_id,
              "request": json.dumps({"batchId": batch_id})}
    return _shred(_answer([None], body, at), BATCH_RESULTS, params, lossless=lossless)


def shred_model_listing(body: bytes, vins: Sequence[str], request: Mapping[str, Any], at: datetime, *,
                        lossless: bool = True) -> dict[str, pa.Table]:
    """A model's campaign listing (the bytes sent, redacted) -> its campaigns and a recall check for each of `vins`
    (those it settled), and the answer's raw row, ready to land as they are. `request`: the year, make and model."""
    params = {"dataset": "recalls", "endpoint": ENDPOINTS["recalls-ymm"].path, "batch_id": None,
              "request": json.dumps(dict(request), default=str), "matched_by": "model"}
    return _shred(_answer(vins, body, at), MODEL_LISTING, params, lossless=lossless)


def _answer(vins: Sequence[str | None], body: bytes | str, at: datetime) -> pa.Table:
    """One answer staged as the journal stages a VIN's (tasks/staging/journal.py), once per VIN it is given to."""
    data = body.encode() if isinstance(body, str) else bytes(body)
    n = len(vins)
    return pa.table({"vin": pa.array(vins, pa.string()), "outcome": pa.array(["found"] * n, pa.string()),
                     "answered_at": pa.array([at] * n, pa.timestamp("us", tz="UTC")),
                     "request": pa.nulls(n, pa.string()), "body": pa.array([data] * n, pa.binary())})


def shred_file(dataset: str, path: Path) -> dict[str, pa.Table]:
    """`shred` over a journal file read whole."""
    from fleet_data.tasks.staging.journal import read_journal

    return shred(dataset, read_journal(path).table)
