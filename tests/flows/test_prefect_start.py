"""The command's own work overlaps Prefect's temporary server as it starts (some 10 s, mostly in the child).

A real temporary server, started by `start_prefect_server` in a process of its own (no PREFECT_API_URL there):
what it is given to do meanwhile runs once the server's process exists and before it answers, and the server then
answers as the command's Prefect API.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, os, sys
from pathlib import Path

import httpx

from fleet_data.flows.processes import start_prefect_server

seen = {}


def meanwhile():
    me = str(os.getpid())
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = stat.read_text().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            continue
        if ppid == me:
            children.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
    seen["children"] = children
    seen["calls"] = seen.get("calls", 0) + 1
    import fleet_data.flows.refresh  # what the command loads meanwhile


url = start_prefect_server(meanwhile=meanwhile)
print(json.dumps({"url": url, "api": os.environ.get("PREFECT_API_URL"), **seen,
                  "health": httpx.get(f"{url}/health", timeout=10).status_code}))
"""


def test_the_flows_load_while_the_temporary_server_starts(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "VDS_", "FLEET_"))}
    env |= {"PREFECT_HOME": str(tmp_path), "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["calls"] == 1
    assert any("uvicorn" in child and "prefect.server" in child for child in seen["children"]), seen["children"]
    assert seen["url"] == seen["api"] and seen["health"] == 200
