"""This project's contender: `fleet refresh` as a user runs it, and what it landed.

The three datasets' chunks run side by side, each chunk with `--concurrency` calls in flight, so the
total is up to 3 x --concurrency: the harness passes total // 3 to compare at the same total.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb

from .fleets import DATASETS

# Where `fleet refresh` lands each dataset (sql/migrations).
TABLES = {"specs": "specs", "market_value": "market_values", "history": "history_reports"}


def command(fleet: Path, db: Path, total_concurrency: int) -> list[str]:
    return [sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fleet), "--db", str(db), "--lake", "",
            "--datasets", ",".join(DATASETS), "--concurrency", str(max(1, total_concurrency // len(DATASETS))),
            "--json"]


def environment(base_url: str, key: str) -> dict[str, str]:
    return {"VDS_BASE_URL": base_url, "VDS_API_KEY": key, "DO_NOT_TRACK": "1",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def result(stdout: str, db: Path) -> dict:
    """The refresh's own summary (calls, found) and the rows in its tables, in the contenders' shape."""
    summary = json.loads(stdout)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = {d: con.execute(f"SELECT count(*) FROM {TABLES[d]}").fetchall()[0][0] for d in DATASETS}
    found = sum(summary["datasets"][d]["found"] for d in DATASETS)
    return {"contender": "ours", "calls": summary["calls"], "ok": found, "rows": rows, "status": summary["status"]}
