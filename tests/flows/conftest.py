"""Flow tests: one Prefect test server per session, the sandbox in-process, small real fleets."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_fleet.csv"
KEY = "flow_test_key_7c1e"  # distinctive, so a leak is easy to find


@pytest.fixture(scope="session")
def prefect_server():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture
def sandbox():
    with run_sandbox(SandboxConfig(insecure_webhooks=True)) as sb:
        yield sb


@pytest.fixture
def service(sandbox, monkeypatch):
    """Point the pipeline at the sandbox with a given key (tasks read it from the environment)."""

    def use(key: str = KEY):
        monkeypatch.setenv("VDS_BASE_URL", sandbox.url)
        monkeypatch.setenv("VDS_API_KEY", key)
        return sandbox

    use()
    return use


def sample_rows(n: int, offset: int = 0) -> pl.DataFrame:
    """`n` clean rows of the sample fleet (valid, distinct VINs), as the user's file has them."""
    from fleet_data.tasks.ingest.vins import is_valid_vin

    fleet = pl.read_csv(SAMPLE, infer_schema=False)
    vin_col = next(c for c in fleet.columns if c.lower() == "vin")
    clean = fleet.filter(pl.col(vin_col).map_elements(is_valid_vin, return_dtype=pl.Boolean))
    clean = clean.with_columns(pl.col(vin_col).str.to_uppercase().str.replace_all(r"[\s-]", "")).unique(vin_col, keep="first", maintain_order=True)
    return clean.slice(offset, n)


@pytest.fixture
def fleet_file(tmp_path):
    def make(n: int = 40, offset: int = 0, name: str = "fleet.csv") -> str:
        path = tmp_path / name
        sample_rows(n, offset).write_csv(path)
        return str(path)

    return make


@pytest.fixture
def db_path(tmp_path) -> str:
    return str(tmp_path / "fleet.duckdb")


@pytest.fixture
def read():
    """`read(db_path, sql)`: rows of a query against a pipeline database."""
    from fleet_data.tasks.store.database import open_database

    def run(path: str, sql: str) -> list[tuple]:
        with open_database(path) as db:
            return db.sql(sql).rows()

    return run


os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
