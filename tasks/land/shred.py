"""Staged answers -> typed table rows, in DuckDB SQL (`sql/shred/<table>.sql`), one statement per table.

The staged answers are the journal's rows (tasks/staging/journal.py SCHEMA: vin, outcome, answered_at, request,
body as the redacted JSON bytes the service sent). The SQL reads them as Arrow and gives the rows the
result models give (tests/tasks/test_shred_equivalence.py holds both to the same corpus), without a
model or a dict per answer. It runs on a connection of its own (in memory, one per thread), so shredding
never holds the store's writer lock; the store lands what it gives as it lands any frame.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Iterable, Mapping

import duckdb
import pyarrow as pa

from tasks.datasets import REGISTRY, Live
from tasks.datasets import table as table_declaration
from tasks.store.database import SQL_DIR, _bind, _statements

SHRED_DIR = SQL_DIR / "shred"
# The tables a dataset's answers land in, in landing order, by the name its fetch goes by: the
# registry's declarations (tasks/datasets.py), read at each use.
TABLES: Mapping[str, tuple[str, ...]] = Live(lambda: {d.fetched_as: tuple(t.name for t in d.tables)
                                                      for d in REGISTRY.values()})
# What a landing records besides the data, from the same staged rows (`sql/shred/_<table>.sql`): these
# read the journal's call columns too, so they need a journal's whole rows.
BOOKKEEPING = ("fetch_status", "failures", "api_calls", "raw_responses")

_local = threading.local()


def _read(name: str) -> list[str]:
    return _statements((SHRED_DIR / name).read_text(encoding="utf-8"))


def _connection() -> duckdb.DuckDBPyConnection:
    con = getattr(_local, "connection", None)
    if con is None:
        con = duckdb.connect(":memory:")
        con.execute("SET TimeZone = 'UTC'")
        for statement in _read("_macros.sql"):
            con.execute(statement)
        _local.connection = con
        _local.selects = {}
    return con


def _select(table: str) -> str:
    selects: dict[str, str] = _local.selects
    if table not in selects:
        path = SHRED_DIR / f"_{table}.sql" if table in BOOKKEEPING else _shred_file(table)
        selects[table] = _statements(path.read_text(encoding="utf-8"))[0]
    return selects[table]


def _shred_file(table: str) -> Path:
    """The SELECT a table's declaration names (sql/shred/<table>.sql unless it says otherwise)."""
    declared = table_declaration(table)
    return declared[1].shred if declared and declared[1].shred else SHRED_DIR / f"{table}.sql"


def shred(dataset: str, answers: pa.Table) -> dict[str, pa.Table]:
    """The rows of each table `dataset`'s staged `answers` land in (found answers; no-data ones for checks)."""
    return shred_tables(answers, TABLES[dataset])


def shred_tables(answers: pa.Table, tables: Iterable[str], **params: Any) -> dict[str, pa.Table]:
    """The rows of `tables` from staged `answers`, one statement per table over the Arrow rows as they are.

    `params`: what the bookkeeping statements bind (`dataset`, `endpoint`).
    """
    con = _connection()
    con.register("answers", answers)
    try:
        for statement in _read("_answers.sql"):
            con.execute(statement)
        out = {}
        for table in tables:
            select = _select(table)
            out[table] = con.sql(select, params=_bind(select, params) or None).to_arrow_table()
        return out
    finally:
        con.execute("DROP TABLE IF EXISTS staged_found")  # the bodies' copy goes with the landing
        con.unregister("answers")


def shred_file(dataset: str, path: Path) -> dict[str, pa.Table]:
    """`shred` over a journal file read whole."""
    from tasks.staging.journal import read_journal

    return shred(dataset, read_journal(path).table)
