"""Benchmark (issue 6): `fleet refresh` side by side with the ceiling, a dlt pipeline and a plain script.

The same calls (specs, market value, history for N VINs) against one sandbox in another process,
at the same total concurrency, for N in SIZES and sandbox latency in LATENCIES_MS. Each contender
runs in its own process, measured the same way (tests/bench/measure.py); the sandbox counts the
calls that answered 200 and the most it served at once. Prints a markdown table and writes
bench-results/compare.json. Asserts only that every contender did all the work.

Fair play: the sandbox's answer caches are warmed once before anything is measured (the first
contender would otherwise pay for them); one Prefect server serves every `fleet refresh` run, so
its start-up is excluded while Prefect's task orchestration is included; `fleet refresh` gets
--concurrency TOTAL/3 because its three datasets run side by side. A second row, "ours (whole command)", is
`fleet refresh` as a user's first command times it with no Prefect server configured: the shared server
started by the command itself, and stopped as it ends (issue 19's measure).
"""
from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

import psutil
import pytest

from fleet_data.connectors.sandbox import FaultConfig, Sandbox
from fleet_data.tasks.settings import DEFAULT_CHUNK_SIZE
from tests.bench.compare import ours, report
from tests.bench.compare.fleets import DATASETS, PATHS, write_fleet
from tests.prefect_server import prefect_server
from tests.bench.measure import ROOT, run_measured

pytestmark = pytest.mark.bench

TOTAL_CONCURRENCY = 96  # = 3 x `fleet refresh`'s default --concurrency 32
# COMPARE_SIZES=200 (comma-separated) for a quick check of the harness itself; COMPARE_LATENCIES=150 for one latency.
SIZES = tuple(int(n) for n in os.environ.get("COMPARE_SIZES", "1000,10000").split(","))
LATENCIES_MS = tuple(int(ms) for ms in os.environ.get("COMPARE_LATENCIES", "0,150").split(","))
KEY = "bench"
# Contenders run by module; dlt's default file format (insert_values) is measured once, on the smallest case.
OTHERS = {"bare_aiohttp": [], "dlt_pipeline": [], "plain_script": []}
DLT_DEFAULT = ("dlt_pipeline", ["--loader-file-format", "insert_values"])
RESULTS = ROOT / "bench-results" / "compare.json"
WARM_UP_VINS = 50


def _script(module: str, extra: list[str], sandbox: Sandbox, fleet: Path, db: Path) -> list[str]:
    return [sys.executable, "-m", f"tests.bench.compare.{module}", "--base-url", sandbox.url, "--key", KEY,
            "--fleet", str(fleet), "--db", str(db), "--concurrency", str(TOTAL_CONCURRENCY), *extra]


def _served(sandbox: Sandbox) -> tuple[int, int, int]:
    """(calls answered 200, calls answered otherwise, peak in flight) on the benchmarked endpoints."""
    stats = sandbox.stats()
    paths = set(PATHS.values())
    ok = sum(r["count"] for r in stats["requests"] if r["endpoint"] in paths and r["status"] == 200)
    other = sum(r["count"] for r in stats["requests"] if r["endpoint"] in paths and r["status"] != 200)
    return ok, other, stats["peak_in_flight"]


def _cpu_seconds(sandbox: Sandbox) -> tuple[float, float]:
    """CPU used so far by finished children (each contender, once it exits) and by the sandbox.

    Wall time depends on whatever else the machine runs; CPU seconds much less, so both are kept.
    """
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    served = psutil.Process(sandbox.process.pid).cpu_times()
    return children.ru_utime + children.ru_stime, served.user + served.system


def _run(name: str, command: list[str], env: dict, sandbox: Sandbox, n: int, latency: int, parse) -> dict:
    sandbox.reset_stats()
    load_before = os.getloadavg()[0]
    client_before, sandbox_before = _cpu_seconds(sandbox)
    measured = run_measured(command, env=env, timeout=1800)
    client_after, sandbox_after = _cpu_seconds(sandbox)
    served_ok, served_other, peak = _served(sandbox)
    row = {"contender": name, "n": n, "latency_ms": latency, "wall_s": measured.wall_s,
           "calls_per_s": served_ok / measured.wall_s, "peak_rss_mb": measured.peak_rss_mb,
           "peak_in_flight": peak, "served_ok": served_ok, "served_other": served_other,
           "client_cpu_s": client_after - client_before, "sandbox_cpu_s": sandbox_after - sandbox_before,
           "returncode": measured.returncode, "load_avg_before": load_before}
    try:
        row["reported"] = parse(measured.stdout)
    except (ValueError, KeyError, IndexError) as exc:
        row["reported"] = {"error": repr(exc), "stderr": measured.stderr[-2000:]}
    if measured.returncode:
        row["stderr"] = measured.stderr[-2000:]
    print(f"  {name:<30} N={n:>6,} {latency:>3} ms  {row['calls_per_s']:7.0f} calls/s  {measured.wall_s:6.1f} s  "
          f"{measured.peak_rss_mb:6.0f} MB  in flight {peak}  CPU {row['client_cpu_s']:.1f} s "
          f"(sandbox {row['sandbox_cpu_s']:.1f} s)", flush=True)
    return row


def _problems(row: dict) -> list[str]:
    """Every way a contender could have done less than the whole job."""
    n, reported = row["n"], row["reported"]
    where = f"{row['contender']} N={n} {row['latency_ms']} ms"
    problems = []
    if row["returncode"]:
        problems.append(f"{where}: exit {row['returncode']}: {row.get('stderr', '')[-500:]}")
    if row["served_ok"] != 3 * n or row["served_other"]:
        problems.append(f"{where}: sandbox served {row['served_ok']} OK and {row['served_other']} other calls")
    if reported.get("ok") != 3 * n:
        problems.append(f"{where}: reported {reported}")
    if reported.get("rows") is not None and reported["rows"] != {d: n for d in DATASETS}:
        problems.append(f"{where}: landed {reported['rows']}")
    if row["contender"].startswith("ours") and reported.get("calls") != 3 * n:
        problems.append(f"{where}: fleet refresh made {reported.get('calls')} calls")
    return problems


def _warm_up(sandbox: Sandbox, largest: Path, small: Path, ours_env: dict, folder: Path) -> None:
    """Nothing measured pays a first-time cost the others did not.

    The sandbox caches answers per VIN: every VIN is called once (the smaller fleets are prefixes of the
    largest). Each contender also runs once on a small fleet: the OS file cache then holds every
    library, and the Prefect server has seen the flow before, as a standing server would have.
    """
    folder.mkdir()
    warm = run_measured(_script("bare_aiohttp", [], sandbox, largest, folder / "bare.duckdb"))
    assert warm.returncode == 0, warm.stderr[-2000:]
    warm = run_measured(ours.command(small, folder / "ours.duckdb", TOTAL_CONCURRENCY), env=ours_env)
    assert warm.returncode == 0, warm.stderr[-2000:]
    # Nearly all of this is fixed cost (imports, the flow's bookkeeping): it shows in every row of ours.
    print(f"\nwarm-up: fleet refresh of {WARM_UP_VINS} VINs took {warm.wall_s:.1f} s", flush=True)
    for module in ("dlt_pipeline", "plain_script"):
        warm = run_measured(_script(module, [], sandbox, small, folder / f"{module}.duckdb"))
        assert warm.returncode == 0, warm.stderr[-2000:]


@pytest.mark.timeout(3600)
def test_side_by_side(tmp_path):
    fleets = {n: write_fleet(tmp_path / f"fleet_{n}.csv", n) for n in SIZES}
    results: list[dict] = []
    sandbox = Sandbox.start_subprocess()
    try:
        with prefect_server() as prefect_env:
            ours_env = {**prefect_env, "PREFECT_LOGGING_LEVEL": "WARNING", **ours.environment(sandbox.url, KEY)}
            # As a user's first command runs it: no server configured and none running, so Prefect's start is in
            # its time. The shared server, the default, stops as soon as the command ends (no idle time), so each
            # run starts it again; the row "ours" above is the same command on a server already running.
            alone_env = {"PREFECT_LOGGING_LEVEL": "WARNING", "PREFECT_HOME": str(tmp_path / "prefect-alone"),
                         "FLEET_PREFECT_SERVER": "shared", "FLEET_PREFECT_IDLE_SECONDS": "0",
                         **ours.environment(sandbox.url, KEY)}
            _warm_up(sandbox, fleets[max(SIZES)], write_fleet(tmp_path / "warm.csv", WARM_UP_VINS), ours_env,
                     tmp_path / "warm")
            for latency in LATENCIES_MS:
                # Exactly `latency` on every call (no jitter), so every contender waits the same.
                sandbox.set_faults(FaultConfig(latency_ms=(latency, latency) if latency else None))
                for n in SIZES:
                    print(f"\nN={n:,}, sandbox latency {latency} ms, total concurrency {TOTAL_CONCURRENCY}", flush=True)
                    case = tmp_path / f"{n}-{latency}"
                    case.mkdir()
                    db = case / "ours.duckdb"
                    results.append(_run("ours", ours.command(fleets[n], db, TOTAL_CONCURRENCY), ours_env, sandbox,
                                        n, latency, lambda out, db=db: ours.result(out, db)))
                    alone = case / "ours-alone.duckdb"
                    results.append(_run("ours (whole command)", ours.command(fleets[n], alone, TOTAL_CONCURRENCY),
                                        alone_env, sandbox, n, latency, lambda out, db=alone: ours.result(out, db)))
                    runs = [(module, extra) for module, extra in OTHERS.items()]
                    if (n, latency) == (min(SIZES), 0):
                        runs.append(DLT_DEFAULT)
                    for module, extra in runs:
                        db = case / f"{module}{'-'.join(['', *extra[1:]])}.duckdb"
                        results.append(_run(module if not extra else f"{module} ({extra[-1]})",
                                            _script(module, extra, sandbox, fleets[n], db), {}, sandbox, n,
                                            latency, lambda out: json.loads(out.strip().splitlines()[-1])))
    finally:
        sandbox.stop()

    for r in results:  # the scripts name themselves; keep the harness's names in the table
        r["reported"].pop("contender", None)
    settings = {"total_concurrency": TOTAL_CONCURRENCY, "ours_concurrency_per_dataset": TOTAL_CONCURRENCY // 3,
                "ours_chunk_size": DEFAULT_CHUNK_SIZE, "latency": "exact (min = max) per call", "sizes": SIZES,
                "prefect": "one server for the session: start-up excluded, task orchestration included",
                "plain_script": "given a thread pool of TOTAL_CONCURRENCY threads",
                "dlt": "parquet loader files unless named; extract workers = max parallel items = TOTAL_CONCURRENCY"}
    report.write_json(RESULTS, results, settings)
    print("\n" + report.table(results) + f"\n\nresults: {RESULTS}")
    problems = [p for r in results for p in _problems(r)]
    assert not problems, "\n".join(problems)
