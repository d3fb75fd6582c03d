"""Fault reliability: every attempt the client makes is one it decided on, recorded and budgeted."""

from __future__ import annotations

import pytest

from connectors import AsyncVehicleDataClient, Settings
from connectors import errors as e
from connectors.retry import RetryPolicy
from connectors.sandbox import FaultConfig


async def test_a_dropped_connection_is_retried_only_by_our_policy(sandbox):
    seen = []
    settings = Settings(api_key="drop_test_key", base_url=sandbox.url,
                        retry=RetryPolicy(max_retries=2, initial_backoff=0.001))
    async with AsyncVehicleDataClient(settings, on_call=seen.append) as client:
        await client.specs("1HGCM82633A004352")  # leaves a kept-alive connection in the pool
        sandbox.set_faults(FaultConfig(drop_rate=1.0))
        sandbox.reset_stats()
        with pytest.raises(e.APIConnectionError):
            await client.specs("1HGCM82633A004353")
    # 1 + 2 retries, each one recorded: the transport sends nothing of its own accord.
    assert len(seen) - 1 == 3
    assert sandbox.count("/specs") == 3
