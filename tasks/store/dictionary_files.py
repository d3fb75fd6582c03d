"""The files generated from the data dictionary (sql/dictionary/) and a fresh store's schema: the docs page
docs/data-dictionary.md and the dbt sources (tasks/store/dbt_sources.py). `python -m fleet_data.tasks.store.dictionary_files`
writes them; tests/sql/test_dictionary.py keeps them up to date."""

from __future__ import annotations

from pathlib import Path

from fleet_data.tasks.store.database import EXPORT_TABLES, Database
from fleet_data.tasks.store.dbt_sources import SOURCES_PATH, sources_yaml
from fleet_data.tasks.store.dictionary import DOCS_PATH, Entry, Relation, catalog, load


def markdown(relations: list[Relation], lake: Entry | None = None) -> str:
    """docs/data-dictionary.md: every table and view, its columns, their types and descriptions; then the
    columns only the Parquet lake has (`lake`: `_lake.toml`)."""
    lines = [
        "# Data dictionary",
        "",
        "<!-- Generated from sql/dictionary/*.toml and the schema (python -m fleet_data.tasks.store.dictionary_files); do not edit. -->",
        "",
        "Every table and view of the published database (`data/fleet.duckdb`), as DuckDB holds it. The same",
        "descriptions are comments in the file: `SELECT table_name, column_name, data_type, comment FROM",
        "duckdb_columns()`, `SELECT table_name, comment FROM duckdb_tables()`, `SELECT view_name, comment FROM",
        "duckdb_views()`. Times are UTC. Money is dollars to the cent, DECIMAL(12,2), as the service gives it.",
        "",
        *[f"- [{r.name}](#{r.name}) ({r.kind})" for r in relations],
    ]
    for relation in relations:
        lines += ["", f"## {relation.name}", "", f"*{relation.kind}.* {relation.description or ''}".rstrip(), "",
                  "| Column | Type | Description |", "| --- | --- | --- |"]
        lines += [f"| `{c}` | `{t}` | {(d or '').replace('|', '/')} |" for c, t, d in relation.columns]
    if lake:
        lines += ["", "## The Parquet lake's own columns", "", lake.description, "",
                  "| Column | Description |", "| --- | --- |"]
        lines += [f"| `{c}` | {d} |" for c, d in lake.columns.items()]
    return "\n".join(lines) + "\n"


def generated() -> dict[Path, str]:
    """The files made from the dictionary and a fresh store's schema: the docs page and the dbt sources."""
    with Database(":memory:") as db:
        relations = catalog(db.connection, load())
        exported = {**EXPORT_TABLES, **db.exported_views()}
    return {DOCS_PATH: markdown(relations, load().get("_lake")), SOURCES_PATH: sources_yaml(relations, exported)}


def main() -> None:
    """`python -m fleet_data.tasks.store.dictionary_files`: write the generated files after editing sql/dictionary/ or the schema."""
    for path, text in generated().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
