"""How many requests per second the sandbox serves on this machine (it must not be our bottleneck).

Run with `make bench` (or `pytest -m bench -s tests/bench/test_sandbox_rps.py`). The sandbox runs as
a child process; this process drives it with aiohttp, bounded to REQUESTS calls at CONCURRENCY.
"""
from __future__ import annotations

import asyncio
import os
import time

import aiohttp
import pytest

from fleet_data.connectors.sandbox import Sandbox
from fleet_data.connectors.sandbox.vehicles import synthetic_vin

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


def _cpu_seconds(pid: int) -> float:
    """User+system CPU of a process (Linux); the server's own cost, whatever else loads the machine."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.bench
def test_sandbox_requests_per_second():
    vins = [synthetic_vin(f"bench-{i}") for i in range(2000)]
    sandbox = Sandbox.start_subprocess()
    try:
        cpu_before = _cpu_seconds(sandbox.process.pid)
        elapsed, statuses = asyncio.run(_drive(sandbox.url, vins))
        server_cpu = _cpu_seconds(sandbox.process.pid) - cpu_before
        served = sandbox.stats()["total"]
    finally:
        sandbox.stop()
    rps = REQUESTS / elapsed
    per_request_us = server_cpu / REQUESTS * 1e6
    print(f"\nsandbox: {REQUESTS} requests, concurrency {CONCURRENCY}, {elapsed:.2f} s, "
          f"{rps:,.0f} requests/s (client on the same machine), server CPU {per_request_us:.0f} us/request "
          f"(~{1e6 / per_request_us:,.0f} requests/s per core), statuses {statuses}")
    assert served == REQUESTS and statuses == {200: REQUESTS}
