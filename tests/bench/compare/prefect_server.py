"""One Prefect server for the whole bench session, so its start (about 15 s here) is not in any figure.

`fleet refresh` otherwise starts a temporary server per run; with PREFECT_API_URL set it talks to this
one instead, and Prefect's task orchestration (task runs, states, the summary artifact) stays measured.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Iterator

import httpx

START_TIMEOUT_SECONDS = 120


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def prefect_server() -> Iterator[dict[str, str]]:
    """Environment for a process that should use the server (PREFECT_API_URL, PREFECT_HOME); stopped on exit."""
    home = tempfile.mkdtemp(prefix="bench-prefect-")
    port = _free_port()
    env = {"PREFECT_HOME": home, "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_UI_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING"}
    # Its own session: the server starts a uvicorn child, and both are stopped together by group id.
    process = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                                "--port", str(port)], env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    api = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"prefect server exited with {process.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{api}/health", timeout=2, trust_env=False).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("prefect server did not answer /api/health in time")
            time.sleep(0.5)
        yield {**env, "PREFECT_API_URL": api}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
        shutil.rmtree(home, ignore_errors=True)
