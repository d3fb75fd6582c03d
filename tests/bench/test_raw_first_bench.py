"""Benchmark (not a timed test): raw first, shred in SQL (issue 13).

Run with `make bench` (or `pytest -m bench -s tests/bench/test_raw_first_bench.py`).

- Landing: answers per CPU second (`time.process_time`, DuckDB's threads included) from staged answers
  (the redacted bytes the fetch keeps) to the typed tables, for specs answers as the sandbox writes
  them: the SQL shredding alone; a journal landed set-based (`land_answers`: data, freshness, calls, raw
  answers, change feed, from the journal's Arrow rows), split into shredding and the store's statements,
  then the same journal again; a whole `land_enrichment` from a chunk result; the models' path
  (validate each answer into its model, walk it into rows) for comparison; and what parsing the JSON
  alone costs on one core (DuckDB's parser, orjson), the floor under any SQL shredding.
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
import pyarrow as pa
import pytest

from connectors import AsyncVehicleDataClient, Settings
from connectors import models as m
from connectors.sandbox import Sandbox
from connectors.sandbox import vehicles as sandbox_vehicles
from tasks.control.calls import Calls
from tasks.land import frames as staging
from tasks.fetch.enrich import fetch_chunk
from tasks.staging.chunk import ChunkResult
from connectors import CallRecord
from tasks.land import shred as shredding
from tasks.staging.journal import AnswerJournal, read_journal
from tasks.land.landing import land_answers, land_enrichment, staged_answers
from tasks.land.shred import shred
from tasks.store.database import open_database

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


def _journal(tmp_path, result: ChunkResult):
    """The answers as a fetch journals them: one call row per answer, the body as bytes."""
    with AnswerJournal.create(tmp_path, "bench", "specs", batch_rows=4096) as journal:
        for i, (vin, body, at) in enumerate(result.found):
            call = CallRecord(endpoint="specs", method="GET", path="/specs", vin=vin, status=200, attempt=1,
                              latency_ms=1.0, units=1, error=None, will_retry=False)
            journal.answer((f"bench-{i}", call, at, None), vin, "found", at, body=body)
    return read_journal(journal.path).table


def _cpu(work):  # noqa: ANN001, ANN202
    started = time.process_time()
    out = work()
    return time.process_time() - started, out


@pytest.mark.timeout(1800)
def test_landing_rate(tmp_path):
    result = _answers(ANSWERS)
    staged = staged_answers(result)
    table = _journal(tmp_path, result)

    shred_s, rows = _cpu(lambda: shred("specs", staged)["specs"])
    bodies = [body for _, body, _ in result.found]
    con = shredding._connection()
    con.register("bodies", pa.table({"body": bodies}))
    con.execute("SET threads = 1")
    parse_s, _ = _cpu(lambda: con.sql("SELECT count(*) FROM bodies WHERE json_valid(decode(body))").fetchall())
    transform_s, _ = _cpu(lambda: con.sql(
        "SELECT json_transform(decode(body), '{\"attributes\": {\"make\": \"JSON\"}, \"colors\": \"JSON\", "
        "\"equipment\": \"JSON\", \"warranties\": \"JSON\"}') FROM bodies").to_arrow_table())
    hash_s, _ = _cpu(lambda: con.sql("SELECT sha256(decode(body)) FROM bodies").to_arrow_table())
    con.execute("RESET threads")
    con.unregister("bodies")
    orjson_s, _ = _cpu(lambda: [orjson.loads(b) for b in bodies])

    def models_path() -> object:
        parsed = [(vin, m.SpecsResult.from_payload(orjson.loads(b), "specs"), at) for vin, b, at in result.found]
        return staging.specs_frame(parsed)

    models_s, frame = _cpu(models_path)

    db = open_database(tmp_path / "fleet.duckdb")
    try:
        run_id = db.start_run("bench")
        timed = {"shredding": 0.0}
        tables = shredding.shred_tables

        def shred_tables(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - the shredding's share of a landing
            spent, out = _cpu(lambda: tables(*args, **kwargs))
            timed["shredding"] += spent
            return out

        import tasks.land.landing as landing

        landing.shred_tables = shred_tables  # type: ignore[assignment]
        try:
            journal_s, _ = _cpu(lambda: land_answers(db, run_id, "specs", table))
            journal_shred_s = timed["shredding"]
            again_s, _ = _cpu(lambda: land_answers(db, run_id, "specs", table))  # a replayed journal
        finally:
            landing.shred_tables = tables  # type: ignore[assignment]
        land_s, _ = _cpu(lambda: land_enrichment(db, run_id, result))  # from a chunk result, the same answers
        in_table = db.sql("SELECT count(*) AS n FROM specs").item()
    finally:
        db.close()
    rate = lambda seconds: f"{ANSWERS / seconds:,.0f} answers/s ({seconds:.2f} s)"  # noqa: E731
    print(f"\nlanding {ANSWERS:,} specs answers, per CPU second: SQL shredding of specs alone {rate(shred_s)}; "
          f"a journal landed set-based {rate(journal_s)}, of which shredding every table "
          f"{journal_shred_s:.2f} s and the store's statements (upserts, change feed, commit) "
          f"{journal_s - journal_shred_s:.2f} s; the same journal again {rate(again_s)}; land_enrichment from a "
          f"chunk result {rate(land_s)}; the models' path {rate(models_s)}. On one core: DuckDB parses "
          f"{rate(parse_s)}, json_transform of four members {rate(transform_s)}, sha256 {rate(hash_s)}, "
          f"orjson.loads {rate(orjson_s)}")
    assert rows.num_rows == frame.height == in_table == ANSWERS


async def _cpu_per_call(url: str, mode: str) -> tuple[float, int]:
    settings = Settings(api_key="bench_raw_first", base_url=url)
    vins = _vins(CALLS)
    cpu = time.process_time()
    answered = 0
    if mode == "fetch_chunk":
        result = await fetch_chunk(
            "specs",
            [{"vin": v} for v in vins],
            calls=Calls(settings=settings, concurrency=CONCURRENCY),
        )
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
