"""The command line every contender script shares, and its one-line JSON result."""
from __future__ import annotations

import argparse
import json


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--base-url", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--fleet", required=True, help="CSV with vin,state,mileage (fleets.write_fleet)")
    p.add_argument("--db", help="DuckDB file the rows land in (unused by the ceiling)")
    p.add_argument("--concurrency", type=int, required=True, help="calls in flight at most, all endpoints together")
    return p


def emit(contender: str, *, calls: int, ok: int, rows: dict[str, int] | None) -> None:
    """One line on stdout: what was called and what landed, for the harness to check."""
    print(json.dumps({"contender": contender, "calls": calls, "ok": ok, "rows": rows}), flush=True)
