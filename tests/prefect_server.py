"""A real Prefect server (`prefect server start`) on a loopback port, for tests and benches whose processes need one.

Used by tests/flows/test_deployment.py (deploy, worker, CLI against it), tests/test_packaging.py (the installed
wheel's refresh reports to it) and the side-by-side bench (its start is in no figure). The flow tests in this
process use Prefect's own test harness instead (tests/flows/conftest.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

START_TIMEOUT_SECONDS = 150  # a server on 2 busy cores


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stop_group(process: subprocess.Popen) -> None:
    """Stop a process started in its own session and whatever it started (the server's uvicorn child), by group id."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextlib.contextmanager
def prefect_server(home: Path | None = None) -> Iterator[dict[str, str]]:
    """The environment a client process needs to use the server (PREFECT_API_URL, PREFECT_HOME...); stopped on exit.

    `home` is the server's PREFECT_HOME (a temporary folder, removed afterwards, if not given); its log is
    `server.log` there, and its tail is in the error should the server not start.
    """
    with prefect_server_process(home) as (env, _):
        yield env


@contextlib.contextmanager
def prefect_server_process(home: Path | None = None) -> Iterator[tuple[dict[str, str], subprocess.Popen]]:
    """As `prefect_server`, with the server's process (its own session: `stop_group` stops it and its children)."""
    with contextlib.ExitStack() as stack:
        if home is None:
            home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fleet-prefect-server-")))
        port = _free_port()
        env = {"PREFECT_HOME": str(home), "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
               "PREFECT_UI_ENABLED": "false"}
        # Nothing of the calling process's Prefect settings (its API URL, its home) nor the service's key.
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(("VDS_", "PREFECT_", "FLEET_"))}
        log_path = home / "server.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                                        "--port", str(port), "--no-ui"], env={**inherited, **env}, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        stack.callback(stop_group, process)
        api = f"http://127.0.0.1:{port}/api"
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"prefect server exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{api}/health", timeout=2, trust_env=False).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"prefect server did not answer /api/health in time:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield {**env, "PREFECT_API_URL": api}, process
