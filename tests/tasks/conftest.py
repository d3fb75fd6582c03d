"""Task tests that call the service: the sandbox over a real loopback socket, a fresh database each."""

from __future__ import annotations

import pytest

from fleet_data.connectors import Settings
from fleet_data.connectors.sandbox import run_sandbox
from fleet_data.tasks.store.database import open_database

KEY = "task_test_key_5d2e"


@pytest.fixture
def sandbox():
    with run_sandbox() as sb:
        yield sb


@pytest.fixture
def settings(sandbox):
    """`settings()` for the default key, `settings("test_enterprise")` for another account."""

    def make(key: str = KEY) -> Settings:
        return Settings(api_key=key, base_url=sandbox.url)

    return make


@pytest.fixture
def store(tmp_path):
    database = open_database(tmp_path / "fleet.duckdb")
    yield database
    database.close()
