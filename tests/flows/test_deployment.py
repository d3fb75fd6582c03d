"""`prefect.yaml` deployed to a process work pool and run by a worker, end to end, against a real Prefect server.

What an operator does, in processes of their own: `prefect server start`, `prefect work-pool create`,
`prefect deploy --all` from the checkout, a Secret block holding the key, `prefect deployment run`,
`prefect worker start --run-once`. The sandbox is this test's (a thread, on loopback). Then the run is
found from both sides: its rows in DuckDB (`runs.prefect_flow_run_id`), and in Prefect the flow run
named after our run id, tagged with its fleet file and datasets, with its INFO logs and summary
artifact. A second deployment run fails after its ingest (a webhook receiver on an address it cannot
listen on, which only a deployment's parameters can ask for): its run is recorded `failed`, and nothing
is printed at exit.
A `fleet refresh` against the same server is named, tagged, linked and logged the same way, while its
terminal stays quiet.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox
from tests.prefect_server import prefect_server, stop_group

from .conftest import sample_rows

ROOT = Path(__file__).resolve().parents[2]
KEY = "deploy_test_key_5d0b"  # only ever in the Secret block: a leak is easy to find
SECRET_BLOCK = "vds-api-key"
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[dict[str, str]]:
    """A Prefect server on a loopback port with its own home; the environment its clients need."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VDS_", "PREFECT_", "FLEET_"))}
    with prefect_server(tmp_path_factory.mktemp("prefect-server-home")) as server_env:
        # A worker's flow runs start `python -m fleet_data.flows.engine` (prefect.yaml): this environment's
        # Python, as in an activated virtualenv.
        yield env | server_env | {"PYTHONUNBUFFERED": "1",
                                  "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


@pytest.fixture(scope="module")
def sandbox_url() -> Iterator[str]:
    with run_sandbox(SandboxConfig(insecure_webhooks=True)) as sandbox:
        yield sandbox.url


def _run(command: list[str], env: dict[str, str], timeout: float = 120, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run a command in its own session, stopped with everything it started if it overstays."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, **kwargs)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(process)
        out, err = process.communicate()
        pytest.fail(f"{' '.join(command[:5])} ran over {timeout} s:\n{out[-3000:]}\n{err[-3000:]}")
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _prefect(env: dict[str, str], *args: str, timeout: float = 120) -> str:
    done = _run([sys.executable, "-m", "prefect", *args], env, timeout, cwd=ROOT)
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def _api(env: dict[str, str], method: str, path: str, body: dict | None = None) -> Any:
    response = httpx.request(method, env["PREFECT_API_URL"] + path, json=body, timeout=30, trust_env=False)
    response.raise_for_status()
    return response.json()


def _logs(env: dict[str, str], flow_run_id: str) -> list[dict]:
    return _api(env, "POST", "/logs/filter", {"logs": {"flow_run_id": {"any_": [flow_run_id]}}, "limit": 200})


def _run_deployment(env: dict[str, str], name: str, parameters: dict[str, Any]) -> str:
    out = _prefect(env, "deployment", "run", name, "--params", json.dumps(parameters))
    match = re.search(r"UUID: ([0-9a-f-]{36})", out)
    assert match, out
    return match.group(1)


def _runs_row(db: Path, flow_run_id: str) -> dict[str, Any]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT run_id, status, message, prefect_flow_run_id FROM runs "
                           "WHERE prefect_flow_run_id = $id", {"id": flow_run_id}).fetchall()
    assert len(rows) == 1, f"runs rows linked to flow run {flow_run_id}: {rows}"
    return dict(zip(("run_id", "status", "message", "prefect_flow_run_id"), rows[0]))


def _count(db: Path, sql: str, **params: Any) -> int:
    with duckdb.connect(str(db), read_only=True) as con:
        return int(con.execute(sql, params).fetchone()[0])


KEY_SOURCES = """
import os
import pytest
from prefect.blocks.system import Secret
from fleet_data.flows import apikey

apikey.SECRET_BLOCK = "no-such-key-block"
with pytest.raises(apikey.MissingKey, match="VDS_API_KEY.*Secret block named 'no-such-key-block'"):
    with apikey.key_for_this_run():
        pass
with apikey.key_for_this_run(needed=False):  # a dry run calls nothing: no key needed
    assert "VDS_API_KEY" not in os.environ

Secret(value="key_from_the_block").save("test-key-block")
apikey.SECRET_BLOCK = "test-key-block"
with apikey.key_for_this_run():
    assert os.environ["VDS_API_KEY"] == "key_from_the_block"
assert "VDS_API_KEY" not in os.environ  # for the run's length only
os.environ["VDS_API_KEY"] = "key_from_the_environment"
with apikey.key_for_this_run():  # the environment comes first
    assert os.environ["VDS_API_KEY"] == "key_from_the_environment"
print("checked")
"""


def test_the_key_comes_from_the_environment_else_the_secret_block(server, tmp_path):
    # A process of its own (its Prefect client talks to this module's server), in a folder with no .env.
    done = _run([sys.executable, "-c", KEY_SOURCES], {**server, "PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "checked", done.stderr[-3000:]


def test_prefect_yaml_runs_on_a_worker_named_tagged_linked_and_logged(server, sandbox_url, tmp_path):
    env = server
    fleet = tmp_path / "small_fleet.csv"
    sample_rows(6).write_csv(fleet)
    good_db, failing_db = tmp_path / "good" / "fleet.duckdb", tmp_path / "failing" / "fleet.duckdb"

    _prefect(env, "work-pool", "create", "fleet", "--type", "process")
    _prefect({**env, "FLEET_HOME": str(ROOT)}, "--no-prompt", "deploy", "--all")
    # The key lives in a Secret block, never in a deployment's parameters or the worker's environment.
    save = f"import os; from prefect.blocks.system import Secret; Secret(value=os.environ['KEY_TO_SAVE']).save({SECRET_BLOCK!r})"
    saved = _run([sys.executable, "-c", save], {**env, "KEY_TO_SAVE": KEY})
    assert saved.returncode == 0, saved.stderr[-3000:]

    good = _run_deployment(env, "fleet-refresh/monthly-values", {"paths": [str(fleet)], "options": {
        "db": str(good_db), "lake": str(tmp_path / "good" / "lake"), "datasets": ["specs", "market_value"]}})
    # Fails inside a task holding the database, with another dataset's chunk running beside it: the recall
    # batch's webhook receiver cannot listen on an address of another machine (TEST-NET-1). `fleet refresh`
    # refuses it before starting; the flow's options take any HOST:PORT.
    failing = _run_deployment(env, "fleet-refresh/weekly-recalls", {"paths": [str(fleet)], "options": {
        "db": str(failing_db), "lake": None, "datasets": ["recalls", "specs"], "webhook_listen": "192.0.2.1:8080"}})

    # The worker's environment: where the checkout is and which service to call; no key.
    worker_env = {**env, "FLEET_HOME": str(ROOT), "VDS_BASE_URL": sandbox_url}
    worker = _run([sys.executable, "-m", "prefect", "worker", "start", "--pool", "fleet", "--run-once"],
                  worker_env, timeout=300, cwd=tmp_path)
    output = worker.stdout + worker.stderr

    # The good run: completed, its rows in DuckDB, linked both ways.
    flow_run = _api(env, "GET", f"/flow_runs/{good}")
    assert flow_run["state_type"] == "COMPLETED", output[-5000:]
    row = _runs_row(good_db, good)
    assert row["status"] == "completed"
    assert flow_run["name"] == row["run_id"]
    assert {"fleet", "fleet-file:small_fleet.csv", "dataset:specs", "dataset:market_value"} <= set(flow_run["tags"])
    assert _count(good_db, "SELECT count(*) FROM vehicles WHERE run_id = $r", r=row["run_id"]) == 6
    assert _count(good_db, "SELECT count(*) FROM specs WHERE run_id = $r", r=row["run_id"]) == 6
    assert _count(good_db, "SELECT count(*) FROM market_values WHERE run_id = $r", r=row["run_id"]) > 0
    # Its INFO logs reached the server, in words rather than Python reprs; the summary artifact too.
    logs = _logs(env, good)
    messages = [entry["message"] for entry in logs if entry["level"] == 20]
    ingested = [m for m in messages if m.startswith("ingested")]
    assert ingested and not any("{" in m or "'" in m for m in ingested), messages
    artifacts = _api(env, "POST", "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [good]}}})
    assert "fleet-refresh-summary" in {a["key"] for a in artifacts}
    assert any(row["run_id"] in (a.get("description") or "") for a in artifacts)
    assert KEY not in output and not any(KEY in entry["message"] for entry in logs)

    # The failing run: failed in Prefect and in our table (not left `running`), and no native
    # extension's leak report at the flow-run process's exit.
    assert _api(env, "GET", f"/flow_runs/{failing}")["state_type"] == "FAILED", output[-5000:]
    failed_row = _runs_row(failing_db, failing)
    assert failed_row["status"] == "failed" and "192.0.2.1" in (failed_row["message"] or ""), failed_row
    assert "nanobind" not in output, output[-5000:]


def test_a_cli_refresh_is_named_tagged_linked_and_logged_on_the_server(server, sandbox_url, tmp_path):
    fleet = tmp_path / "cli_fleet.csv"
    sample_rows(4, offset=10).write_csv(fleet)
    db = tmp_path / "fleet.duckdb"
    env = {**server, "VDS_BASE_URL": sandbox_url, "VDS_API_KEY": KEY}
    done = _run([sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fleet), "--db", str(db), "--lake", "",
                 "--datasets", "specs", "--json"], env, timeout=180, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = json.loads(done.stdout)["run_id"]
    assert " INFO " not in done.stderr, done.stderr  # the terminal stays quiet without -v

    (flow_run,) = _api(server, "POST", "/flow_runs/filter", {"flow_runs": {"name": {"any_": [run_id]}}})
    assert {"fleet-file:cli_fleet.csv", "dataset:specs"} <= set(flow_run["tags"])
    assert _runs_row(db, flow_run["id"])["run_id"] == run_id
    messages = [entry["message"] for entry in _logs(server, flow_run["id"]) if entry["level"] == 20]
    assert any(m.startswith("ingested") for m in messages), messages
