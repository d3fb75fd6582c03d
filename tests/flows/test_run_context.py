"""One run, one context: the working store is opened once whatever the chunk size, and let go at the end."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import RefreshOptions
from fleet_data.tasks.run import context
from fleet_data.tasks.store.files import working_path

pytestmark = pytest.mark.usefixtures("prefect_server")


@pytest.fixture
def connects(monkeypatch):
    """Every `duckdb.connect` of this process, by the file it named."""
    opened: list[str] = []
    real = duckdb.connect

    def counting(database=":memory:", *args, **kwargs):
        opened.append(str(database))
        return real(database, *args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", counting)
    return opened


@pytest.mark.parametrize("chunk_size", [4, 40])
def test_a_refresh_opens_its_working_store_once_whatever_the_chunk_size(service, fleet_file, tmp_path, connects,
                                                                         chunk_size):
    db = tmp_path / "fleet.duckdb"
    summary = refresh_fleet([fleet_file(40)], RefreshOptions(db=str(db), lake=None, chunk_size=chunk_size,
                                                             datasets=["specs", "market_value", "history", "recalls"]))
    assert summary["status"] == "completed"
    assert summary["datasets"]["specs"]["found"] + summary["datasets"]["specs"]["no_data"] == 40
    working = str(working_path(db))
    assert [p for p in connects if Path(p).resolve() == Path(working).resolve()] == [working]
    assert context._contexts == {}  # the run let go of its context, and so of its store
    duckdb.connect(working).close()  # nobody holds the working store any more


def test_a_task_outside_its_run_is_told_so():
    with pytest.raises(RuntimeError, match="holds no database in this process"):
        context.current("20260101T000000Z-nobody")
