"""The fleet's to-do list: what needs doing now for safety, one row per vehicle and reason.

Park now, park outside, stolen and not recovered, active liens, new title brands (named query `report_todo`):
the report opens with it and counts its headline from it, category by category. Data hygiene (mileage
conflicts: `report_mileage_conflicts`) is apart on the page; the CSV written beside the report for people who
work in spreadsheets holds both, the safety rows first (`todo_rows`).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import polars as pl

NEW_BRAND_DAYS = 30  # a title brand stays on the list this long after the answer that first showed it
COLUMNS = {"priority": pl.Int32, "category": pl.String, "unit_number": pl.String, "vin": pl.String, "plate": pl.String,
           "fleet": pl.String, "year": pl.Int64, "make": pl.String, "model": pl.String, "reason": pl.String,
           "since": pl.Date}
# A spreadsheet reads a cell starting with one of these as a formula: the fleet file's text stays text.
FORMULA_START = r"^[=+\-@\t\r]"


class Source(Protocol):
    def query(self, name: str, **params: Any) -> pl.DataFrame: ...


def gather_todo(source: Source, now: datetime) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the to-do list, the mileage conflicts: data hygiene)."""
    todo = source.query("report_todo", brands_since=now - timedelta(days=NEW_BRAND_DAYS))
    return todo.select([pl.col(c).cast(t) for c, t in COLUMNS.items()]), source.query("report_mileage_conflicts")


def todo_rows(todo: pl.DataFrame, conflicts: pl.DataFrame) -> pl.DataFrame:
    """What the CSV holds: the to-do list, then a row per mileage conflict in the same columns."""
    # The reason is the view's (mileage_conflicts.reason): it says what the valuation was really asked with.
    rows = conflicts.select(
        pl.lit(6, pl.Int32).alias("priority"), pl.lit("mileage conflict").alias("category"),
        "vin", "unit_number", "plate", "fleet", "year", "make", "model", "reason",
        pl.col("history_date").alias("since"))
    return pl.concat([todo, rows.select([pl.col(c).cast(t) for c, t in COLUMNS.items()])])


def todo_path(report: str | Path) -> Path:
    """The CSV beside a report: report.html -> todo.csv, fleet.report.html -> fleet.todo.csv, x.html -> x.todo.csv."""
    target = Path(report)
    name = target.name
    if name.endswith("report.html"):
        return target.with_name(name[: -len("report.html")] + "todo.csv")
    return target.with_name(f"{target.stem}.todo.csv")


def write_todo_csv(todo: pl.DataFrame, out: str | Path) -> Path:
    """The list as CSV (UTF-8 with a BOM, so Excel reads names right), whole or not at all."""
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = [c for c, t in COLUMNS.items() if t == pl.String]
    safe = todo.drop("priority").with_columns(
        pl.when(pl.col(c).str.contains(FORMULA_START))
        .then(pl.lit("'") + pl.col(c)).otherwise(pl.col(c)).alias(c) for c in text)
    temporary = target.with_name(f".{target.name}.writing")
    safe.write_csv(temporary, include_bom=True)
    os.replace(temporary, target)
    return target
