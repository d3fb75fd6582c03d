"""Benchmark (not a timed test): raw first, shred in SQL (issue 13).

Run with `make bench` (or `pytest -m bench -s tests/bench/test_raw_first_bench.py`).

- Landing: answers/s from staged answers (the redacted bytes the fetch keeps) to the typed tables, for
  specs answers as the sandbox writes them: the SQL shredding alone, a whole `land_enrichment` (data,
  freshness, calls, raw answers, change feed) into a DuckDB file, and the models' path it replaced
  (validate each answer into its model, walk it into rows) for comparison.
- Fetch: CPU per call in the fetching process (`time.process_time`), the sandbox in its own process at
  0 ms latency, 64 calls in flight: the chunk's fetch as it is now (bytes, no model), the typed client
  (a model per answer: the fetch before), and a bare loop of the client's `request`.
Asserts only that everything asked for was answered and landed.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone

import orjson
import pytest

from connectors import AsyncVehicleDataClient, Settings
from connectors import models as m
from connectors.sandbox import Sandbox
from connectors.sandbox import vehicles as sandbox_vehicles
from tasks import staging
from tasks.enrich import ChunkResult, fetch_chunk
from tasks.landing import land_enrichment, staged_answers
from tasks.shred import shred
from tasks.storage import open_database

pytestmark = pytest.mark.bench
ANSWERS = 100_000
CALLS = 6_000
CONCURRENCY = 64


def _vins(n: int) -> list[str]:
    return [f"1HGCM8263{i:07d}A" for i in range(n)]  # never the sandbox's fault-trigger serials


def _answers(n: int) -> ChunkResult:
    at = datetime(2026, 11, 1, tzinfo=timezone.utc)
    found = [(vin, orjson.dumps({"input": {"vin": vin}, **sandbox_vehicles.specs(vin)}), at) for vin in _vins(n)]
    return ChunkResult("specs", found=found)


@pytest.mark.timeout(1800)
def test_landing_rate(tmp_path):
    result = _answers(ANSWERS)
    staged = staged_answers(result)

    started = time.perf_counter()
    rows = shred("specs", staged)["specs"]
    shred_s = time.perf_counter() - started

    started = time.perf_counter()
    bodies = [orjson.loads(body) for _, body, _ in result.found]
    parsed = [(vin, m.SpecsResult.from_payload(b, "specs"), at) for (vin, _, at), b in zip(result.found, bodies)]
    frame = staging.specs_frame(parsed)
    models_s = time.perf_counter() - started

    db = open_database(tmp_path / "fleet.duckdb")
    try:
        run_id = db.start_run("bench")
        started = time.perf_counter()
        land_enrichment(db, run_id, result)
        land_s = time.perf_counter() - started
        started = time.perf_counter()
        land_enrichment(db, run_id, result)  # the same answers again (a forced refresh, a replayed journal)
        again_s = time.perf_counter() - started
        in_table = db.sql("SELECT count(*) AS n FROM specs").item()
    finally:
        db.close()
    print(f"\nlanding {ANSWERS:,} specs answers: SQL shredding {ANSWERS / shred_s:,.0f} answers/s "
          f"({shred_s:.2f} s); models' path (parse, validate, walk into rows) {ANSWERS / models_s:,.0f} answers/s "
          f"({models_s:.2f} s); whole land_enrichment into DuckDB {ANSWERS / land_s:,.0f} answers/s ({land_s:.2f} s), "
          f"the same answers again {ANSWERS / again_s:,.0f} answers/s ({again_s:.2f} s)")
    assert rows.num_rows == frame.height == in_table == ANSWERS


async def _cpu_per_call(url: str, mode: str) -> tuple[float, int]:
    settings = Settings(api_key="bench_raw_first", base_url=url)
    vins = _vins(CALLS)
    cpu = time.process_time()
    answered = 0
    if mode == "fetch_chunk":
        result = await fetch_chunk("specs", [{"vin": v} for v in vins], settings=settings, concurrency=CONCURRENCY)
        answered = len(result.found) + len(result.no_data)
    else:
        queue = list(reversed(vins))
        async with AsyncVehicleDataClient(settings) as client:

            async def worker() -> None:
                nonlocal answered
                while queue:
                    vin = queue.pop()
                    try:
                        if mode == "typed client":
                            answer = await client.specs(vin)
                            orjson.dumps(answer.raw)  # what the fetch journalled per answer before
                        else:
                            await client.request("specs", {"vin": vin})
                    except Exception:  # noqa: BLE001 - a VIN without data is still an answered call
                        pass
                    answered += 1

            await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return (time.process_time() - cpu) * 1000 / CALLS, answered


@pytest.mark.timeout(1800)
def test_fetch_cpu_per_call():
    sandbox = Sandbox.start_subprocess()
    try:
        asyncio.run(_cpu_per_call(sandbox.url, "bare request"))  # warm the sandbox and the imports
        figures = {mode: asyncio.run(_cpu_per_call(sandbox.url, mode))
                   for mode in ("fetch_chunk", "typed client", "bare request")}
    finally:
        sandbox.stop()
    print(f"\nCPU per call in the fetching process, {CALLS:,} specs calls, {CONCURRENCY} in flight, sandbox at "
          f"0 ms in its own process: " + "; ".join(f"{mode} {ms:.3f} ms" for mode, (ms, _) in figures.items()))
    assert all(answered == CALLS for _, answered in figures.values())
