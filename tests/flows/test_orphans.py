"""Nothing a `fleet` command starts outlives it, `kill -9` included.

Without PREFECT_API_URL a refresh runs Prefect's temporary server as a child process; the embedded
sandbox is a thread of the command itself. Killing the command with SIGKILL gives it no chance to
clean up: its children must die on their own, and the server's port must be free again.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

from fleet_data.flows.processes import die_with_parent_process

ROOT = Path(__file__).resolve().parents[2]


def _gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE  # dead, waiting to be reaped by whoever adopted it
    except psutil.NoSuchProcess:
        return True


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _server_port(process: psutil.Process) -> int | None:
    try:
        command = process.cmdline()
    except psutil.NoSuchProcess:
        return None
    if "uvicorn" in command and "--port" in command:
        return int(command[command.index("--port") + 1])
    return None


def test_kill_9_of_a_refresh_leaves_no_process_it_started(fleet_file, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API_URL", "VDS_"))}
    env |= {"PYTHONPATH": str(ROOT), "PREFECT_HOME": str(tmp_path / "prefect-home")}
    command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", fleet_file(200), "--db", str(tmp_path / "fleet.duckdb"),
               "--lake", ""]
    with (tmp_path / "refresh.log").open("wb") as log:
        # Its own process group, so this test can clean up whatever happens.
        refresh = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        parent = psutil.Process(refresh.pid)
        deadline = time.monotonic() + 120
        port = None
        while port is None or not _listening(port):
            assert refresh.poll() is None, (tmp_path / "refresh.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the temporary Prefect server never came up"
            port = next((p for p in map(_server_port, parent.children(recursive=True)) if p), None)
            time.sleep(0.1)
        started = parent.children(recursive=True)
        assert started  # at least the server

        os.kill(refresh.pid, signal.SIGKILL)
        refresh.wait(timeout=30)
        deadline = time.monotonic() + 20
        while not all(map(_gone, started)) or _listening(port):
            if time.monotonic() > deadline:
                left = [(p.pid, " ".join(p.cmdline())[:120]) for p in started if not _gone(p)]
                raise AssertionError(f"left behind after kill -9: {left}; port {port} open: {_listening(port)}")
            time.sleep(0.2)
    finally:
        try:
            os.killpg(refresh.pid, signal.SIGKILL)  # the group outlives its leader: clean up any orphan
        except ProcessLookupError:
            pass
        refresh.wait(timeout=30)


def test_a_refresh_that_ends_normally_stops_its_server(fleet_file, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API_URL", "VDS_"))}
    env |= {"PYTHONPATH": str(ROOT), "PREFECT_HOME": str(tmp_path / "prefect-home")}
    command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", fleet_file(5), "--db", str(tmp_path / "fleet.duckdb"),
               "--lake", "", "--datasets", "specs"]
    seen: dict[psutil.Process, int | None] = {}  # every child seen, with the server's port
    with (tmp_path / "refresh.log").open("wb") as log:
        refresh = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        parent = psutil.Process(refresh.pid)
        while refresh.poll() is None:
            try:
                for child in parent.children(recursive=True):
                    if seen.get(child) is None:
                        seen[child] = _server_port(child)
            except psutil.NoSuchProcess:
                break
            time.sleep(0.1)
        assert refresh.wait(timeout=180) == 0, (tmp_path / "refresh.log").read_text()[-2000:]
        assert any(seen.values()), seen  # the temporary server ran...
        assert all(map(_gone, seen))  # ...and was stopped on the way out, like everything else
        assert not any(_listening(port) for port in seen.values() if port)
    finally:
        try:
            os.killpg(refresh.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


_SERVE_LIKE = """
import multiprocessing, sys, time
from fleet_data.flows.processes import die_with_parent_process

def flow_run():
    assert die_with_parent_process(every=0.1)
    print("watching", flush=True)
    time.sleep(120)

if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=flow_run)  # as prefect.serve runs a flow
    child.start()
    print(child.pid, flush=True)
    time.sleep(120)
"""


def test_a_flow_run_child_of_a_killed_serve_ends_itself(tmp_path):
    script = tmp_path / "serve_like.py"
    script.write_text(_SERVE_LIKE)
    parent = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        assert parent.stdout.readline().strip() == "watching" and not _gone(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 20
        while not _gone(child):
            assert time.monotonic() < deadline, "the flow-run child outlived its parent"
            time.sleep(0.1)
        assert die_with_parent_process() is False  # in any other process, it does nothing
    finally:
        try:
            os.killpg(parent.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        parent.wait(timeout=30)
