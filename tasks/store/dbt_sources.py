"""The dbt sources file (dbt-duckdb) over the published database and over the Parquet lake, from the dictionary.

Two sources, each table and view described as in sql/dictionary/:
  fleet       the published file, attached read-only as `fleet` by the dbt profile (dbt/profiles.yml)
  fleet_lake  the lake's Parquet folders, read in place (dbt-duckdb's `external_location`), partition
              columns typed from the folder names; ownership_records (personal data) is not there.
Where both live comes from the environment when dbt runs: FLEET_DB (used by the profile) and FLEET_LAKE;
without them, the repository's data/fleet.duckdb and data/lake, found from dbt's profiles folder (dbt/).
Written by `python -m fleet_data.tasks.store.dictionary_files`; a test keeps the file equal to what this
module generates.
"""

from __future__ import annotations

import json

from fleet_data.tasks.store.dictionary import DICTIONARY_DIR, Relation, load

SOURCES_PATH = DICTIONARY_DIR.parent.parent / "dbt" / "models" / "sources.yml"
LAKE_LOCATION = ("read_parquet('{{ env_var(\"FLEET_LAKE\", flags.PROFILES_DIR ~ \"/../data/lake\") }}/{name}/**/*.parquet', "
                 "hive_partitioning = true)")


def _text(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML string


def _table(relation: Relation, extra: list[tuple[str, str]], indent: str) -> list[str]:
    lines = [f"{indent}- name: {relation.name}", f"{indent}  description: {_text(relation.description or '')}",
             f"{indent}  columns:"]
    for column, _, description in relation.columns:
        lines += [f"{indent}    - name: {column}", f"{indent}      description: {_text(description or '')}"]
    for column, description in extra:
        lines += [f"{indent}    - name: {column}", f"{indent}      description: {_text(description)}"]
    return lines


def sources_yaml(relations: list[Relation], exported: dict[str, list[str]]) -> str:
    """`relations`: the database's tables and views (dictionary.catalog); `exported`: what the lake holds, by
    name, with the partition columns it adds (storage.EXPORT_TABLES and Database.exported_views)."""
    lake_columns = load()["_lake"].columns
    lines = ["# Generated from sql/dictionary/ by `python -m fleet_data.tasks.store.dictionary_files`; do not edit.", "version: 2", "",
             "sources:",
             "  - name: fleet",
             f"    description: {_text('The published fleet database (data/fleet.duckdb), attached read-only as fleet.')}",
             "    database: fleet", "    schema: main", "    tables:"]
    for relation in relations:
        lines += _table(relation, [], "      ")
    lines += ["", "  - name: fleet_lake",
              f"    description: {_text(load()['_lake'].description)}",
              "    meta:", f"      external_location: {_text(LAKE_LOCATION)}", "    tables:"]
    for relation in relations:
        if relation.name in exported:
            names = {c for c, _, _ in relation.columns}
            extra = [(c, lake_columns[c]) for c in exported[relation.name] if c not in names and c in lake_columns]
            lines += _table(relation, extra, "      ")
    return "\n".join(lines) + "\n"

