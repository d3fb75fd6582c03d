"""The command's own work overlaps Prefect's temporary server as it starts (some 10 s, mostly in the child).

A real temporary server, started in a process of its own (no PREFECT_API_URL there): what `start_prefect_server`
is given to do meanwhile runs once the server's process exists, and the server then answers as the command's
Prefect API; one launched early (`launch_prefect_server`), before the command imports Prefect, is the one taken.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHILDREN = r"""
import json, os, sys
from pathlib import Path


def servers():
    # This process's children that are Prefect's server: their pids.
    me, found = str(os.getpid()), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = stat.read_text().rsplit(")", 1)[1].split()[1]
            line = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):
            continue
        if ppid == me and "uvicorn" in line and "create_app" in line:
            found.append(stat.parent.name)
    return found
"""

SCRIPT = CHILDREN + r"""
import httpx

from fleet_data.flows.processes import start_prefect_server

seen = {}


def meanwhile():
    seen["servers"] = servers()
    seen["calls"] = seen.get("calls", 0) + 1
    import fleet_data.flows.refresh  # what the command loads meanwhile


url = start_prefect_server(meanwhile=meanwhile)
print(json.dumps({"url": url, "api": os.environ.get("PREFECT_API_URL"), **seen,
                  "health": httpx.get(f"{url}/health", timeout=10).status_code}))
"""

EARLY = CHILDREN + r"""
from fleet_data.flows.processes import launch_prefect_server, start_prefect_server

launch_prefect_server()
seen = {"prefect imported": "prefect" in sys.modules, "launched": servers()}
url = start_prefect_server()
import httpx

print(json.dumps({**seen, "taken": servers(), "url": url, "health": httpx.get(f"{url}/health", timeout=10).status_code}))
"""


def _run(script: str, tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "VDS_", "FLEET_"))}
    env |= {"PREFECT_HOME": str(tmp_path), "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_flows_load_while_the_temporary_server_starts(tmp_path):
    seen = _run(SCRIPT, tmp_path)
    assert seen["calls"] == 1 and len(seen["servers"]) == 1, seen
    assert seen["url"] == seen["api"] and seen["health"] == 200


def test_a_server_launched_before_prefect_is_imported_is_the_one_taken(tmp_path):
    seen = _run(EARLY, tmp_path)
    assert seen["prefect imported"] is False and len(seen["launched"]) == 1, seen
    assert seen["taken"] == seen["launched"] and seen["health"] == 200, seen  # not a second server


HEARTBEATS = r"""
import json, threading

from fleet_data.flows.processes import start_prefect_server

start_prefect_server()
from prefect import flow


def heartbeat_threads():
    # Prefect's flow run heartbeat: a thread running `heartbeat_loop` (prefect/flow_engine.py _send_heartbeats).
    return [t.name for t in threading.enumerate() if t.is_alive()
            and any(getattr(arg, "__name__", "") == "heartbeat_loop" for arg in getattr(t, "_args", ()))]


@flow
def probe():
    return heartbeat_threads()


print(json.dumps({"during the flow": probe()}))
"""


def test_a_flow_run_on_the_temporary_server_sends_no_heartbeats(tmp_path):
    """The temporary server ends with the command: no one is left to miss a heartbeat, and a flow run's end joined
    the heartbeat thread through its one-second sleep (flows/processes.py `without_heartbeats`)."""
    seen = _run(HEARTBEATS, tmp_path)
    assert seen == {"during the flow": []}, seen
