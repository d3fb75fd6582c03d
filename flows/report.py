"""`fleet report`: the fleet at a glance, as one self-contained HTML file.

Like `fleet status` it reads the published database alone, read-only: no service, no Prefect,
never the working store, never a write there. The page itself is built by `tasks/outputs/report.py`; the
to-do list it opens with is also written beside it as CSV (`tasks/outputs/todo.py`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .defaults import DEFAULT_DB
from .exitcodes import COMPLETED, USAGE


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="the fleet at a glance as one HTML file that opens offline (values, recalls, "
                                      "title brands, freshness, units)")
    p.add_argument("--db", default=DEFAULT_DB)
    p.add_argument("--out", default="report.html", help="where to write the page (default: report.html); the to-do "
                                                        "list goes beside it as CSV (report.html -> todo.csv)")
    p.set_defaults(run=run_report)


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
            page, data = build_report(db, str(args.db))
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
    h = data.headline
    known = {k: "unknown" if h[k] is None else f"{h[k]:,}" for k in ("open_recalls", "vehicles_to_park")}  # never checked
    print(f"wrote {written} ({h['vehicles']:,} vehicles, {known['open_recalls']} open recalls, "
          f"{known['vehicles_to_park']} to park) and the to-do list {todo} ({data.todo.height:,} rows)")
    return COMPLETED
