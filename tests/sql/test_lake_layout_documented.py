"""sql/README.md's table of the lake's partitions names every exported table in the row of its own layout
(issue 30: `changes` was partitioned by run and said nowhere). Read against `EXPORT_TABLES`, the code's list."""

from __future__ import annotations

import re

from fleet_data.tasks.store.database import EXPORT_TABLES, SQL_DIR


def documented_layouts() -> dict[str, list[str]]:
    """table -> its partition columns, as the README's table shows them (from the row's example path)."""
    text = (SQL_DIR / "README.md").read_text(encoding="utf-8")
    section = text.split("## The Parquet lake", 1)[1].split("\n## ", 1)[0]
    found: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[2].startswith("`"):
            continue
        partitions = [segment.split("=")[0] for segment in cells[2].strip("`").split("/") if "=" in segment]
        for table in re.findall(r"`([a-z_]+)`", cells[1]):
            found.setdefault(table, partitions)
    return found


def test_every_exported_table_is_documented_with_its_partitions():
    layouts = documented_layouts()
    assert {table: layouts.get(table) for table in EXPORT_TABLES} == dict(EXPORT_TABLES)
