"""Benchmark: client requests/second against the sandbox in another process, per transport.

`make bench` runs it; it prints figures and asserts only that every call succeeded.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from fleet_data.connectors import AsyncVehicleDataClient, Settings
from fleet_data.connectors.errors import NotFoundError
from fleet_data.connectors.sandbox import Sandbox

pytestmark = pytest.mark.bench

REQUESTS = 6000
VINS = [f"1HGCM8263{n:07d}A" for n in range(REQUESTS)]  # never ends in the sandbox's fault-trigger digits


async def _drive(url: str, transport: str, concurrency: int) -> float:
    mode = "httpx" if transport == "httpx-aiohttp" else transport
    settings = Settings(api_key="bench_key", base_url=url, transport=mode, max_connections=concurrency)
    over = None
    if transport == "httpx-aiohttp":  # httpx's API over aiohttp's pool: the middle road, for comparison
        import httpx
        from httpx_aiohttp import AiohttpTransport

        over = AiohttpTransport(limits=httpx.Limits(max_connections=concurrency))
    async with AsyncVehicleDataClient(settings, http_transport=over) as client:
        gate = asyncio.Semaphore(concurrency)
        failures = 0

        async def one(vin: str) -> None:
            nonlocal failures
            async with gate:
                try:
                    await client.recalls(vin)
                except NotFoundError:
                    pass  # a VIN the sandbox has no data for is still an answered call
                except Exception:  # noqa: BLE001 - counted, the figure is what matters
                    failures += 1

        await asyncio.gather(*(one(v) for v in VINS[:200]))  # warm the pool
        started = time.perf_counter()
        await asyncio.gather(*(one(v) for v in VINS))
        elapsed = time.perf_counter() - started
    return REQUESTS / elapsed, failures


@pytest.mark.parametrize("concurrency", [20, 100, 400])
@pytest.mark.parametrize("transport", ["httpx", "httpx-aiohttp", "aiohttp", "http1"])
def test_client_throughput(transport, concurrency):
    sandbox = Sandbox.start_subprocess()
    try:
        rps, failures = asyncio.run(_drive(sandbox.url, transport, concurrency))
    finally:
        sandbox.stop()
    print(f"\nclient transport={transport:13s} concurrency={concurrency:4d}: {rps:8.0f} requests/s ({failures} failed)")
    assert failures == 0
