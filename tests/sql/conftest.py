from datetime import datetime, timezone

import pytest

from tasks.storage import open_database

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)
T1 = datetime(2026, 2, 5, 12, 0, tzinfo=timezone.utc)
T2 = datetime(2026, 3, 5, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def db(tmp_path):
    database = open_database(tmp_path / "fleet.duckdb")
    yield database
    database.close()


def table(db, name: str, order: str):
    # `name`/`order` come from the test itself, never from input.
    return db.sql(f"SELECT * FROM {name} ORDER BY {order}")
