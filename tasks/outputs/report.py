"""The fleet report: one self-contained HTML page, for a fleet manager in a hurry.

`fleet report` builds it from the published database, read-only; every refresh and backfill writes it next to
the lake, with the to-do list beside it as CSV (tasks/outputs/todo.py), and records it (table `reports`). It
opens with safety (park now, park outside, stolen, active liens, new title brands: counted from the to-do list
itself), then what changed since the previous report (at least the last 7 days; `--since` chooses), then data
hygiene (collapsed), then the fleet's value, recalls, title/lien/theft, freshness and units. The figures come
from the named queries `sql/queries/report_*.sql`; the page is drawn by tasks/outputs/report_page.py.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from fleet_data.tasks.outputs.report_page import render
from fleet_data.tasks.outputs.todo import gather_todo, todo_path, todo_rows, write_todo_csv
from fleet_data.tasks.plan.due import ALL_DATASETS, DEFAULT_DATASETS, DEFAULT_FRESHNESS, DEFAULT_NO_DATA_FRESHNESS
from fleet_data.tasks.settings import CLOCK_TOLERANCE

logger = logging.getLogger(__name__)

ROWS_SHOWN = 500  # long lists are cut here (the counts count them all); the views hold every row
CHANGES_SHOWN = 500  # changes listed; the section says how many there were
CHANGE_DAYS = 7  # "What changed" covers at least the last 7 days, and everything since the previous report


class Source(Protocol):
    """What the report reads from: `Published` (read-only snapshot) or the working `Database`."""

    def query(self, name: str, **params: Any) -> pl.DataFrame: ...


@dataclass
class Window:
    """The period "What changed" covers: changes recorded (changes.detected_at) from `since` on."""

    since: datetime
    said: str  # what the section's title says after "What changed": "in the last 7 days", "since run X started"...
    previous: datetime | None = None  # the previous report's writing: the changes recorded after it are new


@dataclass
class ReportData:
    headline: dict[str, Any]
    last_run: dict[str, Any] | None
    value_by_month: pl.DataFrame
    value_today: pl.DataFrame
    recalls_by_component: pl.DataFrame
    unlisted_recalls: dict[str, Any]
    vehicles_to_park: pl.DataFrame
    title_brands: pl.DataFrame
    lien_theft: pl.DataFrame
    flagged_vehicles: pl.DataFrame
    flagged_count: int
    todo: pl.DataFrame  # the to-do list: safety, one row per vehicle and reason (the page's and the cards' counts)
    mileage_conflicts: pl.DataFrame  # data hygiene, with rejected_rows
    rejected_rows: pl.DataFrame
    changes: pl.DataFrame
    window: Window
    freshness: pl.DataFrame
    units_by_month: pl.DataFrame
    generated_at: datetime
    services: pl.DataFrame = field(default_factory=pl.DataFrame)  # where the answers came from (report_banner.py)


def changes_window(source: Source, now: datetime, since: datetime | str | None = None) -> Window:
    """`since` a moment or a run id (from when it started); by default since the previous report was written, and
    at least the last `CHANGE_DAYS` days (a later run that changed nothing does not empty the list)."""
    if isinstance(since, datetime):
        return Window(since, f"since {_when(since)}")
    if isinstance(since, str):
        started = source.query("run_started_at", run_id=since)
        if not started.height:
            raise LookupError(f"no run {since!r}")
        return Window(started.item(), f"since run {since} started ({_when(started.item())})")
    week = now - timedelta(days=CHANGE_DAYS)
    previous = source.query("report_previous")
    written = previous["written_at"][0] if previous.height else None
    if written is not None and written < week:
        return Window(written, f"since the previous report ({_when(written)})", written)
    return Window(week, f"in the last {CHANGE_DAYS} days", written)


def gather(source: Source, now: datetime | None = None, since: datetime | str | None = None) -> ReportData:
    now = now or datetime.now(UTC)
    last_run = source.query("report_last_run")
    todo, conflicts = gather_todo(source, now)
    window = changes_window(source, now, since)
    return ReportData(
        headline=source.query("report_headline").row(0, named=True),
        last_run=last_run.row(0, named=True) if last_run.height else None,
        value_by_month=source.query("report_value_by_month"),
        value_today=source.query("report_value_today"),
        recalls_by_component=source.query("report_recalls_by_component"),
        unlisted_recalls=source.query("report_unlisted_recalls").row(0, named=True),
        vehicles_to_park=source.query("report_vehicles_to_park", limit=ROWS_SHOWN),
        title_brands=source.query("report_title_brands"),
        lien_theft=source.query("report_lien_theft"),
        flagged_vehicles=source.query("report_title_lien_theft_vehicles", limit=ROWS_SHOWN),
        flagged_count=int(source.query("report_title_lien_theft_count").item()),
        todo=todo, mileage_conflicts=conflicts,
        rejected_rows=source.query("report_rejected_rows", limit=ROWS_SHOWN),
        changes=source.query("report_changes", since=window.since, limit=CHANGES_SHOWN),
        window=window,
        freshness=_freshness(source, now),
        units_by_month=source.query("report_units_by_month"),
        generated_at=now,
        services=source.query("report_services"),
    )


def _freshness(source: Source, now: datetime) -> pl.DataFrame:
    freshness = source.query(
        "report_freshness", datasets=list(DEFAULT_FRESHNESS),
        window_hours=[int(w.total_seconds() // 3600) for w in DEFAULT_FRESHNESS.values()],
        no_data_hours=int(DEFAULT_NO_DATA_FRESHNESS.total_seconds() // 3600), now=now,
        future_after=now + CLOCK_TOLERANCE,  # dated ahead (a clock that was ahead): not fresh (tasks/plan/due.py)
    )
    # Datasets a refresh does not ask for by default (ownership) show only once they have answers or failures.
    freshness = freshness.filter(pl.col("dataset").is_in(DEFAULT_DATASETS) | (pl.col("roster") > pl.col("never_answered"))
                                 | (pl.col("failed") > 0))
    return freshness.sort(pl.col("dataset").replace_strict({d: i for i, d in enumerate(ALL_DATASETS)}, default=99))


def build_report(source: Source, database: str, now: datetime | None = None,
                 since: datetime | str | None = None) -> tuple[str, ReportData]:
    """The page's HTML and the figures it shows (`data.todo` is the to-do list, for `write_todo_csv`)."""
    data = gather(source, now, since)
    return render(data, database), data


def write_report_files(page: str, data: ReportData, out: str | Path) -> tuple[Path, Path]:
    """The page at `out` and its to-do list beside it (`todo_path`): the safety rows, then the data hygiene ones."""
    return write_report(page, out), write_todo_csv(todo_rows(data.todo, data.mileage_conflicts), todo_path(out))


def write_run_report(source: Source, db: str, lake: str | None, run_id: str | None = None) -> tuple[Path | None, str | None]:
    """A run's report, written next to the lake (else beside the database): (where, None) or (None, why not).

    With `run_id`, recorded in `reports` (`source` the run's working store), so the next report's "What changed"
    starts from it. The run's data has landed by then: a report that cannot be written is said, never fails the run.
    """
    try:
        page, data = build_report(source, db)
        where = write_report_files(page, data, report_path(db, lake))[0]
        if run_id is not None:
            record_report(source, run_id, where, data)
        return where, None
    except Exception as exc:  # noqa: BLE001 - any failure here is the report's, not the run's
        problem = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        logger.warning("the fleet report was not written: %s", problem)
        return None, problem


def record_report(store: Any, run_id: str, where: Path, data: ReportData) -> None:
    """One row of `reports`: when and where, and the period its "What changed" covered."""
    total = int(data.changes["total"][0]) if data.changes.height else 0
    store.execute("report_record", run_id=run_id, written_at=data.generated_at, path=str(where.resolve()),
                  changes_since=data.window.since, changes=total, to_do=data.todo.height)


def report_markdown(path: Path | None, problem: str | None) -> str:
    """The line the run's Prefect artifact ends with: a link to the report, or why there is none."""
    if path is not None:
        where, todo = path.resolve(), todo_path(path.resolve())
        return (f"\n\n**Fleet report**: [{where.name}]({where.as_uri()}) (`{where}`); "
                f"to-do list for spreadsheets: [{todo.name}]({todo.as_uri()}) (`{todo}`)")
    return f"\n\n**Fleet report** not written: {problem}" if problem else ""


def report_path(db: str | Path, lake: str | Path | None) -> Path:
    """Where a refresh writes the report: in the lake, else beside the database."""
    return Path(lake) / "report.html" if lake else Path(db).with_suffix(".report.html")


def write_report(page: str, out: str | Path) -> Path:
    """Write the page at `out` whole or not at all (a reader never opens half a report)."""
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.writing")
    temporary.write_text(page, encoding="utf-8")
    os.replace(temporary, target)
    return target


def _when(value: datetime) -> str:
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M} UTC"

