"""The data dictionary (sql/dictionary/): every table, view and column of the published file carries its description.

A new column, table or view without a description fails here; so does a description of a column that is gone,
and a generated file (docs/data-dictionary.md, dbt/models/sources.yml) not regenerated after an edit.
"""

from __future__ import annotations

import duckdb
import polars as pl

from fleet_data.tasks.store import dictionary, dictionary_files
from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.store.published import publish_file as publish

VIN = "1HGCM82633A004352"


def _published(tmp_path) -> str:
    """A published file as analysts get it: opened twice (views re-created), a row landed, published."""
    db = tmp_path / "data" / "fleet.duckdb"
    for _ in range(2):
        with open_database(db) as store:
            run = store.start_run("refresh", ["fleet.csv"], {})
            store.land("vehicles", pl.DataFrame({"vin": [VIN]}), run)
    publish(db)
    return str(db)


def test_every_table_view_and_column_of_the_published_file_is_described(tmp_path):
    with duckdb.connect(_published(tmp_path), read_only=True) as con:
        columns = con.sql("SELECT table_name, column_name, comment FROM duckdb_columns() "
                          "WHERE database_name = current_database() AND schema_name = 'main'").fetchall()
        relations = con.sql(
            "SELECT table_name, comment FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' "
            "UNION ALL SELECT view_name, comment FROM duckdb_views() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND NOT internal").fetchall()
        overview = con.sql("SELECT comment FROM duckdb_columns() WHERE table_name = 'vehicle_overview' "
                           "AND column_name = 'park_now'").fetchall()
    assert len(columns) > 400 and len(relations) > 25
    assert [(t, c) for t, c, text in columns if not (text or "").strip()] == []
    assert [t for t, text in relations if not (text or "").strip()] == []
    assert "park it" in overview[0][0]  # a view's own words, not only its table's


def test_the_dictionary_describes_nothing_that_does_not_exist(db):
    relations = {r.name: {c for c, _, _ in r.columns} for r in dictionary.catalog(db.connection, dictionary.load())}
    stale = []
    for name, entry in dictionary.load().items():
        if name.startswith("_"):
            continue  # the lake's own columns (_lake.toml)
        if name not in relations:
            stale.append(name)
        stale += [f"{name}.{c}" for c in entry.columns if c not in relations.get(name, set())]
        stale += [f"{name} columns_from {s}" for s in entry.columns_from if s not in relations]
    assert stale == []


def test_a_column_without_a_description_is_reported(db):
    db.connection.execute("CREATE TABLE analyst_scratch (vin VARCHAR)")
    undescribed = [r.name for r in dictionary.catalog(db.connection, dictionary.load()) if r.description is None]
    assert undescribed == ["analyst_scratch"]


def test_comments_follow_an_edited_description(db):
    entries = dictionary.load()
    entries["vehicles"].columns["unit_number"] = "Edited."
    # Only what differs is written: the column, and the views that take its description from it.
    assert dictionary.apply(db.connection, entries) == 6
    edited = db.sql("SELECT table_name FROM duckdb_columns() WHERE column_name = 'unit_number' AND comment = 'Edited.'")
    assert sorted(edited["table_name"]) == ["changes_latest_run", "open_recalls", "vehicle_overview", "vehicle_value_change",
                                           "vehicle_value_trend", "vehicles"]
    assert dictionary.apply(db.connection, entries) == 0


def test_the_generated_docs_and_dbt_sources_are_up_to_date():
    for path, text in dictionary_files.generated().items():
        assert path.read_text(encoding="utf-8") == text, f"{path} is stale: run `python -m fleet_data.tasks.store.dictionary_files`"
