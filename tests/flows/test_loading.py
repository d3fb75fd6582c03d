"""How the command and Prefect's server load their code: the garbage collector held while they load
(tasks/control/collector.py, flows/prefect_app.py), and the shared server's supervisor starting Prefect's server
before it loads anything it does not need. Each case runs in a process of its own: freezing the collector's
objects is for good."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env |= {"PREFECT_HOME": str(tmp_path / "prefect-home"), "DO_NOT_TRACK": "1", "PYTHONPATH": str(ROOT / "src"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not done.stderr, done.stderr[-3000:]  # what was set aside is freed at exit: no library says it leaked
    return json.loads(done.stdout.strip().splitlines()[-1])


COMMAND = r"""
import gc, json
usual = gc.get_threshold()
from fleet_data.tasks.control import collector
collector.loading()
loading = gc.get_threshold()
from fleet_data.flows.commands import load_flows
load_flows()
print(json.dumps({"usual": usual, "loading": loading, "after": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
"""


def test_the_command_sets_its_loaded_code_aside_from_collections(tmp_path):
    """Loading the flows (Prefect and pydantic: some hundred thousand objects that live as long as the command) happens
    with few collections, and what it made is then out of every later one; the usual pace comes back."""
    seen = _run(COMMAND, tmp_path)
    assert seen["loading"][0] > 10 * seen["usual"][0]
    assert seen["after"] == seen["usual"]
    assert seen["frozen"] > 100_000


AGAIN = r"""
import gc, json
usual = gc.get_threshold()[0]
from fleet_data.tasks.control import collector
collector.loaded()
first = gc.get_freeze_count()
made_since = [[n] for n in range(10_000)]  # objects a later command would leave behind
collector.loading()
collector.loaded()
print(json.dumps({"first": first, "again": gc.get_freeze_count(), "pace": gc.get_threshold()[0], "usual": usual}))
"""


def test_commands_run_one_after_another_in_one_process_set_aside_only_the_first_load(tmp_path):
    """`main` called again in one process (the tests do) loads nothing new: what it made since is left to the
    collector, not frozen for good."""
    seen = _run(AGAIN, tmp_path)
    assert seen["again"] == seen["first"] and seen["pace"] == seen["usual"]


SERVER_APP = r"""
import gc, json
from fleet_data.flows.prefect_app import create_app
app = create_app()
print(json.dumps({"enabled": gc.isenabled(), "frozen": gc.get_freeze_count(), "app": type(app).__name__,
                  "api": any(getattr(r, "path", "") == "/api" for r in app.routes)}))
"""


def test_prefects_server_app_is_prefects_own_loaded_without_collections(tmp_path):
    """The local servers' app is Prefect's (its API mounted at /api); what loading it made is set aside, and the
    collector runs again for what the server does after."""
    seen = _run(SERVER_APP, tmp_path)
    assert seen == {"enabled": True, "frozen": seen["frozen"], "app": "FastAPI", "api": True}
    assert seen["frozen"] > 100_000


SUPERVISOR = r"""
import json, sys
from fleet_data.flows.processes import prefect_server_process
server, url = prefect_server_process(settings_here=False)
server.kill()
server.wait()
print(json.dumps(sorted(m for m in ("prefect", "pydantic", "httpx", "fleet_data.connectors") if m in sys.modules)))
"""


def test_the_supervisor_starts_prefects_server_before_loading_anything_else(tmp_path):
    """The shared server's supervisor (flows/shared_prefect.py) spawns Prefect's server with the standard library
    alone: the service's code and Prefect's took it 0.2 s more, which a first command waited for."""
    assert _run(SUPERVISOR, tmp_path) == []
