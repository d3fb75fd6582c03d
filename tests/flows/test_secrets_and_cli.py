"""The key never reaches the database, the lake, the logs or the artifacts; the CLI says what it used."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import pytest

from fleet_data.flows.cli import main
from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import RefreshOptions

pytestmark = pytest.mark.usefixtures("prefect_server")
SECRET = "sk_live_LEAKCANARY_5f2e9a"


def _files_containing(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


async def _prefect_texts() -> str:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter

    async with get_client() as client:
        logs, offset = [], 0
        while offset < 20_000:  # the API pages at 200
            page = await client.read_logs(log_filter=LogFilter(), limit=200, offset=offset)
            logs += page
            offset += 200
            if len(page) < 200:
                break
        artifacts = await client.read_artifacts(limit=200)
        runs = await client.read_flow_runs(limit=200)
    parts = [log.message for log in logs]
    parts += [json.dumps(a.data, default=str) + str(a.description) for a in artifacts]
    parts += [json.dumps(r.parameters, default=str) for r in runs]
    return "\n".join(parts)


def _prefect_files() -> list[Path]:
    """Everything Prefect itself keeps: its home (profiles, result storage) and the server's database."""
    from prefect.settings import PREFECT_HOME, PREFECT_SERVER_DATABASE_CONNECTION_URL

    database = Path(PREFECT_SERVER_DATABASE_CONNECTION_URL.value().split(":///", 1)[1])
    files = [p for p in Path(PREFECT_HOME.value()).rglob("*") if p.is_file()]
    return files + [p for p in database.parent.glob(database.name + "*") if p.is_file()]


def _wait_for_prefect_records(needle: bytes, limit: float = 20.0) -> list[Path]:
    """Logs and events reach the server's database in the background: wait until the run's id is there."""
    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        files = _prefect_files()
        if any(needle in p.read_bytes() for p in files):
            return files
        time.sleep(0.25)
    raise AssertionError("the run never reached Prefect's database: the scan would prove nothing")


def test_the_key_is_absent_from_everything_a_run_writes(sandbox, fleet_file, tmp_path, monkeypatch, caplog, capfd):
    monkeypatch.setenv("VDS_BASE_URL", sandbox.url)
    monkeypatch.setenv("VDS_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    db, lake = tmp_path / "fleet.duckdb", tmp_path / "lake"
    summary = refresh_fleet([fleet_file(12)], RefreshOptions(db=str(db), lake=str(lake), datasets=["specs", "recalls",
                                                             "history"]))
    assert summary["units"] > 0 and sandbox.count(key=SECRET) > 0  # the key was used...
    assert any("HTTP Request" in r.getMessage() for r in caplog.records)  # ...and request logs were scanned
    out, err = capfd.readouterr()
    assert SECRET not in out + err
    assert SECRET not in "\n".join(r.getMessage() for r in caplog.records)
    assert _files_containing(tmp_path, SECRET.encode()) == []  # DuckDB file, WAL, lake, staging
    assert list(lake.rglob("*.parquet"))
    prefect_texts = asyncio.run(_prefect_texts())
    assert "Fleet refresh" in prefect_texts  # the summary artifact is there
    assert SECRET not in prefect_texts
    # Prefect's own records, byte by byte: the server's database (flow and task runs, parameters,
    # logs, events, artifacts) and its home (result storage). The run id proves the scan sees them.
    prefect_files = _wait_for_prefect_records(summary["run_id"].encode())
    assert [str(p) for p in prefect_files if SECRET.encode() in p.read_bytes()] == []


def test_cli_dry_run_prints_the_plan_without_a_service(fleet_file, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("VDS_API_KEY", raising=False)
    monkeypatch.delenv("VDS_BASE_URL", raising=False)
    db = tmp_path / "fleet.duckdb"
    code = main(["refresh", fleet_file(8), "--db", str(db), "--dry-run", "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "embedded sandbox" not in err  # a plan calls nothing: no service, not even the sandbox
    summary = json.loads(out)
    assert summary["status"] == "planned" and summary["estimated_units"] == 8 * 5


def test_cli_refuses_unusable_files_with_one_clear_message(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("VDS_API_KEY", raising=False)
    monkeypatch.delenv("VDS_BASE_URL", raising=False)
    bad = tmp_path / "no_vins.csv"
    bad.write_text("unit,plate\n1,ABC\n")
    db = tmp_path / "fleet.duckdb"
    code = main(["refresh", str(bad), "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2
    assert "no_vins.csv" in err and "VIN" in err
    assert "Traceback" not in err


def test_cli_lookup_prints_a_table_or_json_and_fails_cleanly(capsys, monkeypatch):
    monkeypatch.delenv("VDS_API_KEY", raising=False)
    monkeypatch.delenv("VDS_BASE_URL", raising=False)
    assert main(["lookup", "recalls-ymm", "2019", "Toyota", "Camry"]) == 0
    assert "recall_count" in capsys.readouterr().out
    assert main(["lookup", "specs", "1HGCM82633A004352", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["attributes"]["make"] and answer["input"]["key"] == "[redacted]"
    assert main(["lookup", "market-value", "1HGCM82633A004352", "--condition", "mint"]) == 1
    assert "Invalid condition" in capsys.readouterr().err


def test_fleet_sandbox_serves_until_terminated():
    import os
    import signal
    import subprocess
    import sys

    import httpx

    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen([sys.executable, "-m", "fleet_data.flows.cli", "sandbox", "--port", "0", "--seed", "3"],
                               cwd=root, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(root)})
    try:
        line = process.stdout.readline().strip()
        assert line.startswith("SANDBOX_URL=http://127.0.0.1:")
        answer = httpx.get(line.split("=", 1)[1] + "/v1/recalls-ymm",
                           params={"year": "2019", "make": "Toyota", "model": "Camry", "key": "k"}, timeout=10)
        assert answer.status_code == 200 and answer.json()["success"] is True
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
