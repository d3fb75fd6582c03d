"""`fleet report`: the fleet at a glance, as one self-contained HTML file.

Like `fleet status` it reads the published database alone, read-only: no service, no Prefect,
never the working store, never a write there (so it records no report: runs do). The page itself is built by
`tasks/outputs/report.py`; the to-do list it opens with is also written beside it as CSV (`tasks/outputs/todo.py`).
`--since DATE|RUN_ID` sets the period "What changed" covers (by default: since the previous report a run
wrote, and at least the last 7 days).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, date, datetime
from pathlib import Path

from .defaults import DEFAULT_DB
from fleet_data.tasks.exitcodes import COMPLETED, USAGE


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="the fleet at a glance as one HTML file that opens offline (safety first, what "
                                      "changed, values, recalls, title brands, freshness, units)")
    p.add_argument("--db", default=DEFAULT_DB)
    p.add_argument("--out", default="report.html", help="where to write the page (default: report.html); the to-do "
                                                        "list goes beside it as CSV (report.html -> todo.csv)")
    p.add_argument("--since", metavar="DATE|RUN_ID", type=since_value,
                   help="what changed since this day (YYYY-MM-DD, UTC), moment (ISO 8601) or run's start (its id); "
                        "default: since the previous report a run wrote, and at least the last 7 days")
    p.set_defaults(run=run_report)


def since_value(text: str) -> datetime | str:
    """A day (its midnight UTC), an ISO 8601 moment (UTC unless it says), or else a run id, looked up in the database."""
    text = text.strip()
    try:
        day = date.fromisoformat(text)
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    except ValueError:
        pass
    if not text or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"{text!r} is neither a date (YYYY-MM-DD) nor a run id")
    return text


def run_report(args: argparse.Namespace) -> int:
    import duckdb

    from fleet_data.tasks.outputs.report import build_report, write_report_files
    from fleet_data.tasks.store.database import DatabaseError
    from fleet_data.tasks.store.published import open_published

    if not Path(args.db).is_file():  # only the published file: the working store is the runs' own
        print(f"error: {args.db}: no such database (run `fleet refresh` first, or pass --db)", file=sys.stderr)
        return USAGE
    out = Path(args.out)
    if out.is_dir():
        print(f"error: --out {args.out} is a folder: give a file name, e.g. {out / 'report.html'}", file=sys.stderr)
        return USAGE
    try:
        with open_published(args.db) as db:
            page, data = build_report(db, str(args.db), since=args.since)
    except LookupError:
        print(f"error: --since {args.since}: neither a date (YYYY-MM-DD) nor a run in {args.db}", file=sys.stderr)
        return USAGE
    except DatabaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE
    except duckdb.CatalogException as exc:  # a file written by an older version, without the report's views
        reason = " ".join(str(exc).split())[:200]
        print(f"error: {args.db} lacks what the report reads ({reason}); a `fleet refresh` or `fleet backfill` with "
              "this version updates it", file=sys.stderr)
        return USAGE
    try:
        written, todo = write_report_files(page, data, out)
    except OSError as exc:
        print(f"error: cannot write {args.out}: {exc.strerror or exc}; choose another --out", file=sys.stderr)
        return USAGE
    counts = dict(data.todo.group_by("category").len().iter_rows())
    changes = int(data.changes["total"][0]) if data.changes.height else 0
    print(f"wrote {written} ({data.headline['vehicles']:,} vehicles; {counts.get('park now', 0):,} to park now, "
          f"{counts.get('park outside', 0):,} to park outside; {changes:,} changes {data.window.said}) and the to-do "
          f"list {todo} ({data.todo.height:,} rows, then {data.mileage_conflicts.height:,} of data hygiene)")
    return COMPLETED
