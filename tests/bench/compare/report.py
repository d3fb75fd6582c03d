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
    """Each row gains `ours_speed_ratio` (our calls/s over theirs at the same N and latency) and, with a
    latency, `mean_in_flight`: calls/s x latency (Little's law; the latency is exact), the concurrency
    actually kept up over the run, where `peak_in_flight` is only its highest point."""
    ours = {(r["n"], r["latency_ms"]): r for r in results if r["contender"] == OURS}
    out = []
    for r in results:
        mine = ours.get((r["n"], r["latency_ms"]))
        ratio = mine["calls_per_s"] / r["calls_per_s"] if mine and r["calls_per_s"] else None
        mean = r["calls_per_s"] * r["latency_ms"] / 1000 if r["latency_ms"] else None
        out.append({**r, "ours_speed_ratio": ratio, "mean_in_flight": mean})
    return out


def table(results: list[dict]) -> str:
    lines = ["| contender | VINs | latency | calls/s | wall s | peak RSS MB | peak / mean in flight | client CPU s "
             "| sandbox CPU s | ours ÷ theirs |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in with_ratios(results):
        ratio = "—" if r["contender"] == OURS or r["ours_speed_ratio"] is None else f"{r['ours_speed_ratio']:.2f}×"
        mean = "—" if r["mean_in_flight"] is None else f"{r['mean_in_flight']:.0f}"
        lines.append(f"| {r['contender']} | {r['n']:,} | {r['latency_ms']} ms | {r['calls_per_s']:,.0f} | "
                     f"{r['wall_s']:.1f} | {r['peak_rss_mb']:,.0f} | {r['peak_in_flight']} / {mean} | "
                     f"{r['client_cpu_s']:.1f} | {r['sandbox_cpu_s']:.1f} | {ratio} |")
    return "\n".join(lines)


def write_json(path: Path, results: list[dict], settings: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": machine(), "settings": settings, "results": with_ratios(results)},
                               indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    """`python -m tests.bench.compare.report [bench-results/compare.json]`: the table again, from a past run."""
    arguments = sys.argv[1:] if argv is None else argv
    path = Path(arguments[0] if arguments else "bench-results/compare.json")
    data = json.loads(path.read_text())
    facts = data["machine"]
    print(f"{facts['date']}, {facts['nproc']} cores, Python {facts['python']}, "
          + ", ".join(f"{k} {v}" for k, v in facts["versions"].items()) + "\n")
    print(table(data["results"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
