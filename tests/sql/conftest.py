"""A fresh, migrated database file per test."""

import pytest

from fleet_data.tasks.store.database import open_database


@pytest.fixture
def db(tmp_path):
    database = open_database(tmp_path / "fleet.duckdb")
    yield database
    database.close()

