"""The data dictionary: one description of every table, view and column, kept in `sql/dictionary/`.

One TOML file per table or view, named after it (`sql/dictionary/<name>.toml`), beside the SQL that
defines it (`sql/migrations/`, `sql/views/`):

    description = "What one row is, where it comes from."
    columns_from = ["vehicles", "specs"]   # views only: a column not listed below means what it means there

    [columns]
    vin = "Vehicle identification number (17 characters), as the fleet file gives it."

It is the one source of three things: the comments the store writes into DuckDB when it opens
(`COMMENT ON TABLE/VIEW/COLUMN`, read back in `duckdb_tables()`, `duckdb_views()`, `duckdb_columns()`
of the published file), the docs page docs/data-dictionary.md, and the dbt sources file
(tasks/store/dbt_sources.py). tests/sql/test_dictionary.py fails when a table, view or column has no description,
or a description names a column that no longer exists.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DICTIONARY_DIR = Path(__file__).resolve().parents[2] / "sql" / "dictionary"
DOCS_PATH = DICTIONARY_DIR.parent.parent / "docs" / "data-dictionary.md"


@dataclass(frozen=True)
class Entry:
    """One table's or view's description, as written in its file."""

    name: str
    description: str
    columns: dict[str, str]
    columns_from: tuple[str, ...] = ()


@dataclass(frozen=True)
class Relation:
    """A table or view as the database has it, with the descriptions the dictionary gives it."""

    name: str
    kind: str  # table | view
    description: str | None
    columns: list[tuple[str, str, str | None]]  # (name, DuckDB type, description)


def load(directory: Path = DICTIONARY_DIR) -> dict[str, Entry]:
    entries = {}
    for path in sorted(directory.glob("*.toml")):  # `_lake.toml`: the lake's own columns, read as any other
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        entries[path.stem] = Entry(
            path.stem, str(data.get("description", "")).strip(),
            {name: " ".join(str(text).split()) for name, text in data.get("columns", {}).items()},
            tuple(data.get("columns_from", ())),
        )
    return entries


def column_text(entries: dict[str, Entry], relation: str, column: str, seen: frozenset[str] = frozenset()) -> str | None:
    """A column's description: its own, else the one of the first relation in `columns_from` that has it."""
    entry = entries.get(relation)
    if entry is None or relation in seen:
        return None
    if column in entry.columns:
        return entry.columns[column]
    for source in entry.columns_from:
        found = column_text(entries, source, column, seen | {relation})
        if found:
            return found
    return None


def catalog(con: Any, entries: dict[str, Entry]) -> list[Relation]:
    """Every table and view of the database's `main` schema, with the dictionary's descriptions."""
    kinds = con.execute(
        "SELECT table_name, 'table' FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND NOT temporary UNION ALL "
        "SELECT view_name, 'view' FROM duckdb_views() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND NOT internal AND NOT temporary ORDER BY 1"
    ).fetchall()
    columns: dict[str, list[tuple[str, str]]] = {}
    for table, column, data_type in con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE database_name = current_database() "
        "AND schema_name = 'main' ORDER BY table_name, column_index"
    ).fetchall():
        columns.setdefault(table, []).append((column, data_type))
    return [
        Relation(name, kind, entries[name].description if name in entries else None,
                 [(c, t, column_text(entries, name, c)) for c, t in columns.get(name, [])])
        for name, kind in kinds
    ]


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def apply(con: Any, entries: dict[str, Entry] | None = None) -> int:
    """Write the dictionary's descriptions as comments where the database's differ; returns how many were written.

    Only differences are written: a table's comments survive in the file, a view's are lost each time the
    view is re-created (an open that finds the views files, the dictionary or the schema changed), so such an
    open writes the views' again and nothing else. Identifiers come
    from the catalog and texts from our own files (COMMENT ON takes no bound parameters).
    """
    entries = load() if entries is None else entries
    held: dict[tuple[str, str | None], str | None] = {(t, None): c for t, c in con.execute(
        "SELECT table_name, comment FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' "
        "UNION ALL SELECT view_name, comment FROM duckdb_views() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND NOT internal").fetchall()}
    held.update({(t, c): text for t, c, text in con.execute(
        "SELECT table_name, column_name, comment FROM duckdb_columns() WHERE database_name = current_database() "
        "AND schema_name = 'main'").fetchall()})
    statements = []
    for relation in catalog(con, entries):
        keyword = relation.kind.upper()
        if relation.description and held.get((relation.name, None)) != relation.description:
            statements.append(f"COMMENT ON {keyword} {_quoted(relation.name)} IS {_literal(relation.description)}")
        for column, _, text in relation.columns:
            if text and held.get((relation.name, column)) != text:
                statements.append(f"COMMENT ON COLUMN {_quoted(relation.name)}.{_quoted(column)} IS {_literal(text)}")
    if statements:
        _run(con, "BEGIN TRANSACTION")  # one commit for all: a view's ~40 comments are one catalog write
        try:
            for statement in statements:
                _run(con, statement)
            _run(con, "COMMIT")
        except Exception:
            _run(con, "ROLLBACK")
            raise
    return len(statements)


def _run(con: Any, statement: str) -> None:
    con.execute(statement)
    con.complete()  # DuckDB 2 refuses new work while a result is pending
