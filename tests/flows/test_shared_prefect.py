"""FLEET_PREFECT_SERVER=shared: the first command that needs Prefect starts one local server, the next commands reuse
it, and it stops once no command has used it for FLEET_PREFECT_IDLE_SECONDS (flows/shared_prefect.py).

Each case runs `fleet refresh` as a user does, in its own process, against a sandbox in another process, with a
PREFECT_HOME of its own. The bounds are generous limits on a busy machine, not timings.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from fleet_data.connectors.sandbox import Sandbox
from fleet_data.tasks.ingest.fleet_files import read_fleet

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_fleet.csv"
IDLE = 20  # seconds the server waits unused before it stops


@pytest.fixture(scope="module")
def sandbox():
    running = Sandbox.start_subprocess(["--latency-ms", "0"])
    yield running
    running.stop()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("fleet") / "fleet.csv"
    read_fleet([str(SAMPLE)]).roster.head(5).select("unit_number", "vin", "state", "mileage").write_csv(path)
    return str(path)


def _env(sandbox: Sandbox, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VDS_", "PREFECT_API", "FLEET_PREFECT"))}
    return env | {"VDS_BASE_URL": sandbox.url, "VDS_API_KEY": "shared-prefect", "PREFECT_HOME": str(home),
                  "FLEET_PREFECT_SERVER": "shared", "FLEET_PREFECT_IDLE_SECONDS": str(IDLE), "DO_NOT_TRACK": "1",
                  "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PYTHONPATH": str(ROOT)}


def _refresh(fleet: str, db: Path, env: dict[str, str]) -> str:
    """The command's output on stderr (where it says it started a server)."""
    done = subprocess.run([sys.executable, "-m", "fleet_data.flows.cli", "refresh", fleet, "--db", str(db), "--lake",
                           "", "--datasets", "specs"], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def _server(home: Path) -> dict:
    return json.loads((home / "fleet-server" / "server.json").read_text())


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.5)
    return False


@pytest.fixture
def home(tmp_path):
    """A PREFECT_HOME for the case; any shared server still running there at its end is stopped."""
    where = tmp_path / "prefect-home"
    yield where
    state = where / "fleet-server" / "server.json"
    if state.exists():
        pid = json.loads(state.read_text())["pid"]
        if psutil.pid_exists(pid):
            for process in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
                process.kill()


def test_commands_share_one_server_that_stops_once_unused(sandbox, fleet, home, tmp_path):
    env = _env(sandbox, home)
    said = _refresh(fleet, tmp_path / "one.duckdb", env)
    first = _server(home)
    server = psutil.Process(first["pid"])
    started = [server, *server.children(recursive=True)]  # the supervisor and Prefect's uvicorn server
    assert len(started) >= 2
    assert f"started Prefect's shared server (pid {first['pid']}" in said  # a process left behind is said
    # It outlives the command: the service key does not live on in its environment.
    assert all("VDS_API_KEY" not in process.environ() for process in started)

    said = _refresh(fleet, tmp_path / "two.duckdb", env)  # another database: something is due, so Prefect is needed
    assert _server(home) == first  # the same server, not a second one
    assert "started Prefect's shared server" not in said
    runs = httpx.post(f"{first['url']}/flow_runs/filter", json={}, timeout=30).json()
    assert sorted(run["state"]["type"] for run in runs) == ["COMPLETED", "COMPLETED"]  # both runs reported there

    # A lease left by a command killed outright (its process gone) does not keep the server.
    (home / "fleet-server" / "leases" / "999999999").write_text(json.dumps({"started": "1", "server": first["pid"]}))
    assert all(_gone(process.pid, IDLE + 60) for process in started), "the server did not stop once unused"
    assert not (home / "fleet-server" / "server.json").exists()
    assert list((home / "fleet-server" / "leases").iterdir()) == []


def test_a_shared_server_killed_is_started_again_by_the_next_command(sandbox, fleet, home, tmp_path):
    env = _env(sandbox, home)
    _refresh(fleet, tmp_path / "one.duckdb", env)
    first = _server(home)
    server = psutil.Process(first["pid"])
    started = [server, *server.children(recursive=True)]
    server.kill()  # as the OOM killer would: its Prefect server dies with it
    assert all(_gone(process.pid, 30) for process in started)

    _refresh(fleet, tmp_path / "two.duckdb", env)
    second = _server(home)
    assert second["pid"] != first["pid"] and second["url"] != first["url"] or second["started"] != first["started"]
    os.kill(second["pid"], signal.SIGTERM)  # stops at once, whatever its idle time
    assert _gone(second["pid"], 30)
    assert not (home / "fleet-server" / "server.json").exists()


@pytest.mark.parametrize("server", ["temporary", "shared"])
def test_a_command_reports_to_its_server_without_loading_prefects_server_code(server, sandbox, fleet, home, tmp_path):
    """The server the command starts or joins is its PREFECT_API_URL: Prefect's client, which loads the server's
    code (3.8 s of CPU) whenever it has no API URL, never does in the command itself (`-X importtime` lists
    every module the process imported)."""
    env = _env(sandbox, home) | {"FLEET_PREFECT_SERVER": server}
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "fleet_data.flows.cli", "refresh", fleet, "--db",
                           str(tmp_path / "fleet.duckdb"), "--lake", "", "--datasets", "specs", "--json"],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["status"] == "completed"
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert "prefect.flow_engine" in imported  # the flow ran here...
    assert not [name for name in imported if name.startswith("prefect.server.api")]  # ...its server elsewhere
    if server == "shared":
        runs = httpx.post(f"{_server(home)['url']}/flow_runs/filter", json={}, timeout=30).json()
        assert [run["state"]["type"] for run in runs] == ["COMPLETED"]  # and it reported there


HEARTBEATS = r"""
import json, sys, threading

from prefect import flow

from fleet_data.flows.shared_prefect import use_shared_server

use_shared_server(float(sys.argv[1]))


@flow
def probe():
    # Prefect's flow run heartbeat: a thread running `heartbeat_loop` (prefect/flow_engine.py _send_heartbeats).
    return [t.name for t in threading.enumerate() if t.is_alive()
            and any(getattr(arg, "__name__", "") == "heartbeat_loop" for arg in getattr(t, "_args", ()))]


print(json.dumps({"during the flow": probe()}))
"""


def test_a_flow_run_on_the_shared_server_sends_no_heartbeats(sandbox, home):
    """Nobody watches the shared server's runs for heartbeats (no UI, no automation; it stops once unused), and a
    flow run's end joined the heartbeat thread through its one-second sleep: 0.6 s of a 50-VIN run's 4.2 s."""
    env = _env(sandbox, home)
    done = subprocess.run([sys.executable, "-c", HEARTBEATS, str(IDLE)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"during the flow": []}


def test_the_shared_server_is_the_default(sandbox, fleet, home, tmp_path):
    env = _env(sandbox, home)
    del env["FLEET_PREFECT_SERVER"]
    said = _refresh(fleet, tmp_path / "one.duckdb", env)
    assert f"started Prefect's shared server (pid {_server(home)['pid']}" in said


MEANWHILE = r"""
import json, sys

from fleet_data.flows.shared_prefect import folder, use_shared_server

seen = []


def meanwhile():
    # Whether the server had answered yet (it writes server.json once it does).
    seen.append((folder() / "server.json").exists())


use_shared_server(float(sys.argv[1]), meanwhile=meanwhile)
print(json.dumps(seen))
"""


def test_a_command_loads_its_flows_while_the_shared_server_it_started_starts(sandbox, home):
    """What the command does meanwhile (load its flows, 1.4 s of CPU) runs once, before the server it started
    answers; joining a server that runs, it runs once too."""
    env = _env(sandbox, home)
    runs = [subprocess.run([sys.executable, "-c", MEANWHILE, str(IDLE)], env=env, capture_output=True, text=True,
                           timeout=300, check=False) for _ in range(2)]
    assert all(done.returncode == 0 for done in runs), [done.stderr[-2000:] for done in runs]
    assert [json.loads(done.stdout.strip().splitlines()[-1]) for done in runs] == [[False], [True]]


LAUNCHED = r"""
import json, sys, time

from fleet_data.flows.shared_prefect import STARTING, folder, launch, use_shared_server

launch(float(sys.argv[1]))
launched = json.loads((folder() / STARTING).read_text())["pid"]
if sys.argv[2] == "answered":  # the command's own work outlasts the server's start: it answers before the join
    deadline = time.monotonic() + 120
    while not (folder() / "server.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
if sys.argv[2] in ("join", "answered"):
    use_shared_server(float(sys.argv[1]))
    print(json.dumps({"launched": launched, "joined": json.loads((folder() / "server.json").read_text())["pid"]}))
else:
    print(json.dumps({"launched": launched}))
"""


def _supervisors(home: Path) -> list[int]:
    return [p.pid for p in psutil.process_iter(["cmdline"])
            if "fleet_data.flows.shared_prefect" in (p.info["cmdline"] or []) and str(home) in " ".join(p.info["cmdline"])]


def test_a_command_joins_the_server_it_launched_before_loading_prefect(sandbox, home):
    """`launch` starts the server before the command imports Prefect and checks the key; `join` then waits for that
    one, not a second."""
    done = subprocess.run([sys.executable, "-c", LAUNCHED, str(IDLE), "join"], env=_env(sandbox, home),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["joined"] == seen["launched"] and _supervisors(home) == [seen["launched"]]


def test_a_command_says_it_started_the_server_it_launched_though_it_answered_before_the_join(sandbox, home):
    """The server a command launched may answer before the command joins it (its files, lock, plan and key check
    took longer than the server's start): it is still the command that started it, and it says so, as a process it
    leaves running."""
    done = subprocess.run([sys.executable, "-c", LAUNCHED, str(IDLE), "answered"], env=_env(sandbox, home),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["joined"] == seen["launched"]
    assert f"started Prefect's shared server (pid {seen['launched']}" in done.stderr


def test_a_server_launched_and_never_joined_stops_once_its_command_is_gone(sandbox, home):
    """A refused key ends the command before it joins: the server it launched stops then, not ten minutes later."""
    env = _env(sandbox, home) | {"FLEET_PREFECT_IDLE_SECONDS": "600"}
    done = subprocess.run([sys.executable, "-c", LAUNCHED, "600", "leave"], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    launched = json.loads(done.stdout.strip().splitlines()[-1])["launched"]
    assert _gone(launched, 120), "the server launched for nobody still runs"
    assert not (home / "fleet-server" / "server.json").exists()


GONE_FOLDER = r"""
import json, os, sys

from fleet_data.flows.shared_prefect import launch, use_shared_server

launch(float(sys.argv[1]))
os.rmdir(os.getcwd())  # the command's folder removed while the server it launched starts (a scratch folder)
print(json.dumps({"url": use_shared_server(float(sys.argv[1]))}))
"""


def test_the_shared_server_outlives_the_folder_its_command_ran_in(sandbox, home, tmp_path):
    """It runs in its own folder: started from a scratch folder deleted afterwards, Prefect's server failed as it
    imported its next module (the folder was on its import path)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    done = subprocess.run([sys.executable, "-c", GONE_FOLDER, str(IDLE)], cwd=scratch, env=_env(sandbox, home),
                          capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    url = json.loads(done.stdout.strip().splitlines()[-1])["url"]
    assert httpx.get(f"{url}/health", timeout=30).status_code == 200
    assert _server(home)["url"] == url


def test_a_command_with_nothing_to_call_stops_the_server_it_launched_before_it_answers(sandbox, fleet, home, tmp_path):
    """The server is launched before the plan (beside the store's check, the lock and the plan); the plan then finds
    nothing due, or the store refuses the run, and the server is stopped there and then, not left to start beside
    the answer and stop after the command."""
    env = _env(sandbox, home) | {"FLEET_PREFECT_IDLE_SECONDS": "0"}  # the first command's server stops once it ends
    db = tmp_path / "fleet.duckdb"
    _refresh(fleet, db, env)
    assert all(_gone(pid, 60) for pid in _supervisors(home))
    log = home / "fleet-server" / "server.log"
    before = log.read_text()

    said = _refresh(fleet, db, env)  # nothing due: every VIN fresh
    assert "started Prefect's shared server" not in said
    assert all(_gone(pid, 30) for pid in _supervisors(home))
    assert log.read_text()[len(before):].strip().splitlines()[-1] == "stopped before it answered"

    # The store refuses the run (the embedded sandbox's answers never land among another service's): checked as the
    # server starts (flows/checks.py `check_refresh_store`), which is then stopped too.
    before = log.read_text()
    embedded = {k: v for k, v in env.items() if not k.startswith("VDS_")}
    refused = subprocess.run([sys.executable, "-m", "fleet_data.flows.cli", "refresh", fleet, "--db", str(db),
                              "--lake", "", "--datasets", "specs"], env=embedded, capture_output=True, text=True,
                             timeout=300, check=False)
    assert refused.returncode == 2 and "embedded sandbox" in refused.stderr, refused.stderr[-3000:]
    assert all(_gone(pid, 30) for pid in _supervisors(home))
    assert log.read_text()[len(before):].strip().splitlines()[-1] == "stopped before it answered"


SECRET = r"""
import asyncio, json, sys

from prefect.blocks.system import Secret
from prefect.client.orchestration import get_client

from fleet_data.flows.shared_prefect import use_shared_server

use_shared_server(float(sys.argv[1]))


async def block_types() -> int:
    async with get_client() as client:
        return len(await client.read_block_types())

at_start = asyncio.run(block_types())
Secret(value="key_from_the_block").save("vds-api-key")
print(json.dumps({"at_start": at_start, "loaded": Secret.load("vds-api-key").get()}))
"""


def test_a_secret_block_saves_and_loads_though_the_server_registers_no_block_types(sandbox, home):
    """The server skips Prefect's block registration at start (0.3 s: it imports every collection installed); a block
    registers its own type as it is saved, so the API key's Secret (flows/apikey.py) still works on a new home."""
    done = subprocess.run([sys.executable, "-c", SECRET, str(IDLE)], env=_env(sandbox, home), capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"at_start": 0, "loaded": "key_from_the_block"}
