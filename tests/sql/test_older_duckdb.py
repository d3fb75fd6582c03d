"""The published file opens in the DuckDB clients analysts use, not only in ours (issue 20).

DuckDB 2.0 (our Python package) writes a format that DuckDB 1.5 and 1.4 refuse; the R, Node and DBeaver
clients lag the Python package as the CLI does. A file published here is opened, read-only, by the newest
`duckdb-cli` on PyPI (a `duckdb` executable) and by the `duckdb` 1.4 LTS Python package, each in a
virtualenv of its own (they would replace the dev venv's duckdb). Both must read the views, the typed
values (DECIMAL, DATE, TIMESTAMPTZ, JSON, zstd-compressed raw bodies), the macros and the data
dictionary's comments exactly as our DuckDB reads them.

The virtualenvs are built from the registry on first use and kept in build/older-duckdb/ (gitignored), so
later runs take seconds; FLEET_OLDER_DUCKDB_DIR moves them. Delete the folder to test newer releases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import polars as pl
import pytest

from fleet_data.connectors import RetryPolicy, Settings
from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.fetch.enrich import fetch_chunk
from fleet_data.tasks.land.landing import land_answers
from fleet_data.tasks.staging.journal import AnswerJournal, read_journal
from fleet_data.tasks.store import fileformat
from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.store.files import working_path
from fleet_data.tasks.store.published import publish_file

ROOT = Path(__file__).resolve().parents[2]
TOOLS = Path(os.environ.get("FLEET_OLDER_DUCKDB_DIR") or ROOT / "build" / "older-duckdb")
RUN = "20260101T000000Z-older"
VINS = ["1HGCM82633A004352", "1HGCM82633A004353", "1HGCM82633A004363", "1HGCM82633A000404"]
pytestmark = pytest.mark.timeout(900)  # the first run installs two packages

# What each client reads, every value as text (how each prints a DECIMAL or a timestamp is not the point).
QUERIES = {
    "overview": "SELECT CAST(COLUMNS(*) AS VARCHAR) FROM vehicle_overview ORDER BY vin",
    "latest_values": "SELECT vin, CAST(valued_on AS VARCHAR), CAST(retail AS VARCHAR), typeof(retail) "
                     "FROM latest_market_values ORDER BY vin",
    "specs": "SELECT CAST(COLUMNS(*) AS VARCHAR) FROM specs ORDER BY vin",
    "raw_bodies": "SELECT response_hash, CAST(body AS VARCHAR), CAST(fetched_at AS VARCHAR) FROM raw_responses "
                  "ORDER BY response_hash",
    "macro": "SELECT CAST(service_date('12/06/2016') AS VARCHAR), vin_bucket('1HGCM82633A004352')",
    "table_macro": "SELECT count(*) FROM changes_since(TIMESTAMPTZ '2000-01-01 00:00:00+00')",
    "table_comments": "SELECT table_name, comment FROM duckdb_tables() WHERE database_name = current_database() "
                      "UNION ALL SELECT view_name, comment FROM duckdb_views() WHERE NOT internal "
                      "AND database_name = current_database() ORDER BY 1",
    "column_comments": "SELECT table_name, column_name, comment FROM duckdb_columns() "
                       "WHERE database_name = current_database() ORDER BY 1, 2",
}
READER = """
import json, sys
import duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
con.execute("SET TimeZone = 'UTC'")
queries = json.loads(sys.argv[2])
print(json.dumps({"version": duckdb.__version__,
                  "rows": {name: [list(row) for row in con.execute(sql).fetchall()] for name, sql in queries.items()}}))
"""


def _venv(name: str, requirement: str) -> Path:
    """A virtualenv holding `requirement`, built once and kept (a stamp marks it complete)."""
    venv = TOOLS / name
    stamp = venv / ".installed"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == requirement:
        return venv
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", requirement],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    stamp.write_text(requirement, encoding="utf-8")
    return venv


@pytest.fixture(scope="module")
def newest_cli() -> Path:
    return _venv("cli", "duckdb-cli") / "bin" / "duckdb"  # the newest on PyPI: what `pip install duckdb-cli` gives


@pytest.fixture(scope="module")
def lts_python() -> Path:
    return _venv("lts", "duckdb==1.4.*") / "bin" / "python"


@pytest.fixture(scope="module")
def queries(published) -> dict[str, str]:
    return {**QUERIES, "every_relation": every_relation(published)}


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """A published file holding answers from the sandbox of every per-VIN dataset, landed as a run lands them."""
    folder = tmp_path_factory.mktemp("older")
    db = folder / "fleet.duckdb"
    with run_sandbox(SandboxConfig()) as sandbox, open_database(db) as store:
        store.start_run("refresh", ["fleet.csv"], {}, run_id=RUN)
        store.land("vehicles", pl.DataFrame({"vin": VINS, "unit_number": [f"U-{i}" for i in range(len(VINS))]}), RUN)
        settings = Settings(api_key="older_duckdb", base_url=sandbox.url,
                            retry=RetryPolicy(initial_backoff=0.001, max_backoff=0.01, max_retry_after=0.01))
        for dataset in ("specs", "market_value", "history", "lien_theft", "recall_details"):
            with AnswerJournal.create(folder, RUN, dataset, secrets=("older_duckdb",)) as journal:
                _run(fetch_chunk(dataset, [{"vin": v, "state": "CA", "mileage": 42_000} for v in VINS],
                                 calls=Calls(settings=settings, concurrency=2), journal=journal))
            land_answers(store, RUN, dataset, read_journal(journal.path).table)
    publish_file(db)
    return db


def _run(coroutine):  # fetch_chunk is async; the fixture is not
    import asyncio

    return asyncio.run(coroutine)


def every_relation(db: Path) -> str:
    """One query counting the rows of every table and view: each must be readable (a view using a function
    DuckDB 1.4 lacks would fail there)."""
    with duckdb.connect(str(db), read_only=True) as con:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() UNION "
            "SELECT view_name FROM duckdb_views() WHERE NOT internal AND database_name = current_database()"
        ).fetchall()]
    assert len(names) > 30
    return " UNION ALL ".join(f"SELECT '{n}' AS relation, count(*) AS row_count FROM \"{n}\"" for n in sorted(names)) \
        + " ORDER BY relation"


def ours(db: Path, queries: dict[str, str] = QUERIES) -> dict[str, list[list]]:
    with duckdb.connect(str(db), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        return {name: [list(row) for row in con.execute(sql).fetchall()] for name, sql in queries.items()}


def _nulls_as_none(rows: list[dict]) -> list[list]:
    return [list(row.values()) for row in rows]


def test_the_published_file_is_in_the_format_older_duckdb_reads(published):
    with duckdb.connect(str(published), read_only=True) as con:
        assert fileformat.readable_by_older_duckdb(con)
        tag = con.execute("SELECT tags FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    assert tag is not None and tag[0]["storage_version"] == f"{fileformat.STORAGE_VERSION}+"
    mine = ours(published)
    assert len(mine["overview"]) == len(VINS) and mine["raw_bodies"] and mine["specs"]
    assert {row[3] for row in mine["latest_values"] if row[2] is not None} == {"DECIMAL(12,2)"}  # money, to the cent
    assert dict((r[0], r[1]) for r in mine["table_comments"])["vehicle_overview"]  # the dictionary's comments
    compression = con_compression(published)
    assert compression == {"ZSTD"}  # migration 0010's choice survives the format


def con_compression(db: Path) -> set[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT DISTINCT compression FROM pragma_storage_info('raw_responses') "
                           "WHERE column_name = 'body' AND segment_type <> 'VALIDITY'").fetchall()
    return {r[0] for r in rows}


def test_the_newest_duckdb_cli_reads_what_we_read(published, queries, newest_cli):
    version = subprocess.run([str(newest_cli), "--version"], capture_output=True, text=True, timeout=60, check=True)
    expected = ours(published, queries)
    for name, sql in queries.items():
        done = subprocess.run([str(newest_cli), "-readonly", "-json", str(published), "-c",
                               f"SET TimeZone = 'UTC'; {sql};"],
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, f"duckdb {version.stdout.strip()}: {done.stderr[-2000:]}"
        got = _nulls_as_none(json.loads(done.stdout or "[]"))
        assert got == expected[name], name  # text, whole numbers and NULLs: JSON keeps them as they are


def test_the_duckdb_1_4_lts_python_package_reads_what_we_read(published, queries, lts_python):
    done = subprocess.run([str(lts_python), "-c", READER, str(published), json.dumps(queries)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout)
    assert answer["version"].startswith("1.4.")
    assert answer["rows"] == json.loads(json.dumps(ours(published, queries)))


def test_a_store_in_duckdb_2_format_is_published_readable_and_rewritten_once(tmp_path, newest_cli):
    """A store an earlier version of this tool wrote in DuckDB 2.0's own format: published readable, then
    rewritten on the next open, so later publishes are file copies again."""
    db = tmp_path / "fleet.duckdb"
    store = working_path(db)
    with duckdb.connect(str(store)) as con:  # as DuckDB 2.0 writes by default
        con.execute("CREATE TABLE leftover AS SELECT 42 AS answer")
    assert not _readable(store)
    stamp = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with open_database(db) as opened:
        opened.start_run("refresh", [], {}, run_id=RUN, started_at=stamp)
    assert _readable(store)
    publish_file(db)
    done = subprocess.run([str(newest_cli), "-readonly", "-csv", "-noheader", str(db), "-c",
                           "SELECT answer FROM leftover; SELECT run_id FROM runs;"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["42", RUN]


def _readable(path: Path) -> bool:
    with duckdb.connect(str(path), read_only=True) as con:
        return fileformat.readable_by_older_duckdb(con)
