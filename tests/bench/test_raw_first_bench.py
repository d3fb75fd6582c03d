"""Benchmark (not a timed test): raw first, shred in SQL (issue 13), shredded where fetched (issue 19).

Run with `make bench` (or `pytest -m bench -s tests/bench/test_raw_first_bench.py`).

- Landing: answers per CPU second (`time.process_time`, DuckDB's threads and the checkpoint included) from
  staged answers (the redacted bytes the fetch keeps) to the typed tables, for specs answers as the sandbox
  writes them. The writer's share, two ways, each into an empty store and then the same chunk again: the
  typed tables the fetch task staged (tasks/staging/staged_chunk.py, `land_answers` of them: upserts, change feed,
  commit only), and a journal the writer shreds itself (a killed run's, `land_answers` of its Arrow rows);
  then the typed tables in the flow's chunks of 500, a transaction each. The fetch side's share (shred every
  table, write the staged file). For comparison: the SQL shredding of specs alone, the models' path
  (validate each answer into its model, walk it into rows), and what parsing the JSON alone costs on one
  core (DuckDB's parser, orjson), the floor under any SQL shredding.
  Measured 2026-11-26 18:37-18:47 UTC, this 2-core machine (Linux x86_64, Python 3.11, duckdb 2.0.0,
  pyarrow 26.0.1) shared with five other sessions, load average 12-15; main (c7ef0c2) run just before
  in the same session: main's writer 12,300 answers/s first, 16,600 again; now, typed tables 31,000 first
  (2.5x), 50,100 again (3.0x); a journal shredded by the writer 14,300 / 15,500; chunks of 500: 3,800;
  the fetch side's staging 20,200 answers per CPU second. docs/scale.md §5 has the profile.
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

from fleet_data.connectors import AsyncVehicleDataClient, Settings
from fleet_data.connectors import models as m
from fleet_data.connectors.sandbox import Sandbox
from fleet_data.connectors.sandbox import vehicles as sandbox_vehicles
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.fetch.enrich import fetch_chunk
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.connectors import CallRecord
from fleet_data.tasks.land import shred as shredding
from fleet_data.tasks.staging import staged_chunk
from fleet_data.tasks.staging.journal import AnswerJournal, read_journal
from fleet_data.tasks.land.landing import land_answers, staged_answers
from fleet_data.tasks.land.shred import shred, staged_tables
from fleet_data.tasks.staging.staged_chunk import StagedTables
from fleet_data.tasks.store.database import open_database

pytestmark = pytest.mark.bench
ANSWERS = 100_000
CHUNK = 500  # the flow's default chunk size: what a fetch task stages and the writer lands at a time
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
    with AnswerJournal.create(tmp_path, "bench", "specs") as journal:
        for i, (vin, body, at) in enumerate(result.found):
            call = CallRecord(endpoint="specs", method="GET", path="/specs", vin=vin, status=200, attempt=1,
                              latency_ms=1.0, units=1, error=None, will_retry=False)
            journal.answer((f"bench-{i}", call, at, None), vin, "found", at, body=body)
    return read_journal(journal.path).table


def _cpu(work):  # noqa: ANN001, ANN202
    started = time.process_time()
    out = work()
    return time.process_time() - started, out


def _land(db, run_id: str, answers) -> None:  # noqa: ANN001 - a landing and the checkpoint that writes it: both the writer's
    land_answers(db, run_id, "specs", answers)
    db.sql("CHECKPOINT")


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

    # The fetch task's share: shred the finished journal into typed tables, stage them beside it.
    bundle = tmp_path / "chunk.tables.arrow"
    stage_s, _ = _cpu(lambda: staged_chunk.write(bundle, StagedTables("specs", staged_tables("specs", table))))
    # The writer's: each way into a store of its own, first into empty tables, then the same chunk again.
    figures, in_table = {}, []
    for way in ("typed", "journal"):
        db = open_database(tmp_path / way / "fleet.duckdb")
        try:
            run_id = db.start_run("bench")
            for attempt in ("first", "again"):
                started = time.process_time()
                _land(db, run_id, staged_chunk.read(bundle) if way == "typed" else table)  # reading: the writer's too
                figures[way, attempt] = time.process_time() - started
            in_table.append(db.sql("SELECT count(*) AS n FROM specs").item())
        finally:
            db.close()
    # The flow lands chunk by chunk: the same answers staged as the fetch tasks of 500 VINs stage them.
    chunks = [staged_chunk.write(tmp_path / f"chunk-{i}.tables.arrow",
                                 StagedTables("specs", staged_tables("specs", table.slice(i, CHUNK))))
              for i in range(0, table.num_rows, CHUNK)]
    db = open_database(tmp_path / "chunked" / "fleet.duckdb")
    try:
        run_id = db.start_run("bench")
        started = time.process_time()
        for chunk in chunks:
            land_answers(db, run_id, "specs", staged_chunk.read(chunk))
        db.sql("CHECKPOINT")
        chunked_s = time.process_time() - started
        in_table.append(db.sql("SELECT count(*) AS n FROM specs").item())
    finally:
        db.close()
    rate = lambda seconds: f"{ANSWERS / seconds:,.0f} answers/s ({seconds:.2f} s)"  # noqa: E731
    typed, journal = figures["typed", "first"], figures["journal", "first"]
    print(f"\nlanding {ANSWERS:,} specs answers, per CPU second (checkpoint included): the writer landing the "
          f"typed tables the fetch staged {rate(typed)}, the same again {rate(figures['typed', 'again'])}; the "
          f"writer shredding a journal itself (a killed run's) {rate(journal)}, again "
          f"{rate(figures['journal', 'again'])}; staged / journal {journal / typed:.2f}x; the typed tables landed "
          f"in chunks of {CHUNK} (the flow's default), one transaction each, {rate(chunked_s)}. The fetch side's "
          f"staging (shred every table, write them) {rate(stage_s)}. SQL shredding of specs alone {rate(shred_s)}; "
          f"the models' path {rate(models_s)}. On one core: DuckDB parses {rate(parse_s)}, json_transform of "
          f"four members {rate(transform_s)}, sha256 {rate(hash_s)}, orjson.loads {rate(orjson_s)}")
    assert rows.num_rows == frame.height == ANSWERS
    assert in_table == [ANSWERS, ANSWERS, ANSWERS]


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
