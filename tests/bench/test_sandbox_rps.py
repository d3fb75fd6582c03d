"""How many requests per second the sandbox serves on this machine (it must not be our bottleneck).

Run with `make bench` (or `pytest -m bench -s tests/bench/test_sandbox_rps.py`). The sandbox runs as
a child process; this process drives it with aiohttp, bounded to REQUESTS calls at CONCURRENCY.
"""
from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from connectors.sandbox import Sandbox
from connectors.sandbox.vehicles import synthetic_vin

REQUESTS = 20_000
CONCURRENCY = 100
PATHS = ["/specs", "/v1/recalls", "/v2/marketvalue"]


async def _drive(url: str, vins: list[str]) -> tuple[float, dict[int, int]]:
    statuses: dict[int, int] = {}
    queue = iter(range(REQUESTS))
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def worker():
            for i in queue:
                path = PATHS[i % len(PATHS)]
                params = {"key": "bench", "vin": vins[i % len(vins)]}
                async with session.get(url + path, params=params) as answer:
                    await answer.read()
                    statuses[answer.status] = statuses.get(answer.status, 0) + 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return time.perf_counter() - started, statuses


@pytest.mark.bench
def test_sandbox_requests_per_second():
    vins = [synthetic_vin(f"bench-{i}") for i in range(2000)]
    sandbox = Sandbox.start_subprocess()
    try:
        elapsed, statuses = asyncio.run(_drive(sandbox.url, vins))
        served = sandbox.stats()["total"]
    finally:
        sandbox.stop()
    rps = REQUESTS / elapsed
    print(f"\nsandbox: {REQUESTS} requests, concurrency {CONCURRENCY}, {elapsed:.2f} s, "
          f"{rps:,.0f} requests/s, statuses {statuses}")
    assert served == REQUESTS and statuses == {200: REQUESTS}
