"""One sandbox per test module, reached over a real loopback socket with plain httpx."""
from __future__ import annotations

import httpx
import pytest

from fleet_data.connectors.sandbox import FaultConfig, SandboxConfig, run_sandbox


@pytest.fixture(scope="module")
def sandbox():
    with run_sandbox(SandboxConfig(insecure_webhooks=True, batch_vins_per_second=5000)) as sb:
        yield sb


@pytest.fixture
def http(sandbox):
    sandbox.set_faults(FaultConfig())
    with httpx.Client(base_url=sandbox.url, timeout=10, trust_env=False) as client:
        yield client
