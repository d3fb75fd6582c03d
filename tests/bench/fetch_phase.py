"""One fetching process, measured: specs for N VINs at C calls in flight, ours or a bare aiohttp loop.

    python -m tests.bench.fetch_phase MODE BASE_URL VINS_FILE CONCURRENCY

MODE is `bare`, `ours` or `staged`, optionally followed by `:asyncio` or `:uvloop` (the event loop) and
`:aiohttp` (the transport):

ours: `tasks.enrich.fetch_chunk` (the fetch task's own path: scheduler, client, retry policy, each
answer kept as the bytes the service sent, redacted, its shape checked), one chunk of every VIN, on
the loop a fetch task runs it on (`connectors.transport.run_calls`: uvloop) unless told otherwise.
staged: the same, writing the chunk's answer journal as a fetch task does. bare: one aiohttp session,
C workers, each body read and dropped, on asyncio's own loop unless told otherwise. Prints one JSON
line: calls, the answers' rate between the first and the last answer, and this process's CPU seconds
per call (user + system, over the fetch only).
"""
from __future__ import annotations

import asyncio
import json
import sys
import time
from urllib.parse import urlencode

KEY = "bench_key"


async def bare(base_url: str, vins: list[str], concurrency: int, stamps: list[float]) -> int:
    import aiohttp
    from yarl import URL

    targets = iter(f"{base_url}/specs?{urlencode({'vin': vin, 'key': KEY})}" for vin in vins)
    ok = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency), trust_env=False) as session:

        async def worker() -> None:
            nonlocal ok
            for url in targets:
                async with session.get(URL(url, encoded=True)) as response:
                    await response.read()
                    ok += response.status == 200
                    stamps.append(time.perf_counter())

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return ok


async def ours(base_url: str, vins: list[str], concurrency: int, stamps: list[float], staged: bool = False,
               transport: str = "http1") -> int:
    import tempfile
    from contextlib import nullcontext
    from pathlib import Path

    from fleet_data.connectors import Settings
    from fleet_data.tasks.control.calls import Calls
    from fleet_data.tasks.fetch.enrich import fetch_chunk
    from fleet_data.tasks.staging.journal import AnswerJournal

    settings = Settings(api_key=KEY, base_url=base_url, max_connections=concurrency, transport=transport)
    with tempfile.TemporaryDirectory() as folder:
        with AnswerJournal.create(Path(folder), "bench", "specs", secrets=(KEY,)) if staged else nullcontext() as journal:
            result = await fetch_chunk(
                "specs",
                [{"vin": vin} for vin in vins],
                calls=Calls(settings=settings, concurrency=concurrency, on_progress=lambda n: stamps.extend([time.perf_counter()] * n)),
                journal=journal,
            )
    return len(result.found)


def main() -> None:
    mode, base_url, vins_file, concurrency = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    kind, *options = mode.split(":")
    vins = open(vins_file).read().split()
    stamps: list[float] = []
    import aiohttp  # noqa: F401  # imports paid before the clock starts, as a fetch task's process has them
    import uvloop

    if kind != "bare":
        import fleet_data.tasks.fetch.enrich  # noqa: F401
        import fleet_data.tasks.staging.journal  # noqa: F401
    loop = "uvloop" if "uvloop" in options or (kind != "bare" and "asyncio" not in options) else "asyncio"
    cpu = time.process_time()
    started = time.perf_counter()
    if kind == "bare":
        run = bare(base_url, vins, concurrency, stamps)
    else:
        run = ours(base_url, vins, concurrency, stamps, staged=kind == "staged",
                   transport="aiohttp" if "aiohttp" in options else "http1")
    with asyncio.Runner(loop_factory=uvloop.new_event_loop if loop == "uvloop" else None) as runner:
        ok = runner.run(run)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else wall
    print(json.dumps({"mode": mode, "loop": loop, "calls": len(vins), "ok": ok, "wall_s": wall,
                      "rate": (len(stamps) - 1) / span, "cpu_ms_per_call": 1000 * cpu / len(vins)}))


if __name__ == "__main__":
    main()
