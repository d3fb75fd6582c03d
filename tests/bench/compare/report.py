"""The side-by-side results as a markdown table and as JSON (bench-results/compare.json)."""
from __future__ import annotations

import json
import os
import platform
import sys
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path

OURS = "ours"


def machine() -> dict:
    """What the figures depend on: cores, Python, the libraries each contender runs on."""
    packages = ("aiohttp", "requests", "pandas", "duckdb", "dlt", "prefect", "polars")
    return {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "nproc": os.cpu_count(),
            "python": sys.version.split()[0], "platform": platform.platform(),
            "versions": {name: version(name) for name in packages}}


def with_ratios(results: list[dict]) -> list[dict]:
    """Each row gains `ours_speed_ratio`: our calls/s divided by theirs at the same N and latency."""
    ours = {(r["n"], r["latency_ms"]): r for r in results if r["contender"] == OURS}
    out = []
    for r in results:
        mine = ours.get((r["n"], r["latency_ms"]))
        ratio = mine["calls_per_s"] / r["calls_per_s"] if mine and r["calls_per_s"] else None
        out.append({**r, "ours_speed_ratio": ratio})
    return out


def table(results: list[dict]) -> str:
    lines = ["| contender | VINs | latency | calls/s | wall s | peak RSS MB | peak in flight | client CPU s "
             "| sandbox CPU s | ours ÷ theirs |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in with_ratios(results):
        ratio = "—" if r["contender"] == OURS or r["ours_speed_ratio"] is None else f"{r['ours_speed_ratio']:.2f}×"
        lines.append(f"| {r['contender']} | {r['n']:,} | {r['latency_ms']} ms | {r['calls_per_s']:,.0f} | "
                     f"{r['wall_s']:.1f} | {r['peak_rss_mb']:,.0f} | {r['peak_in_flight']} | {r['client_cpu_s']:.1f} | "
                     f"{r['sandbox_cpu_s']:.1f} | {ratio} |")
    return "\n".join(lines)


def write_json(path: Path, results: list[dict], settings: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": machine(), "settings": settings, "results": with_ratios(results)},
                               indent=2) + "\n")
