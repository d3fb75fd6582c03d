"""The watch on Prefect's API (tasks/control/prefect_api.py) against a real HTTP server on loopback."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fleet_data.tasks.control.prefect_api import PrefectWatch


class Health(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keeps the connection open between asks, as Prefect's server does

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.server.asks += 1  # type: ignore[attr-defined]
        body = b"true"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class CountingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Health)
        self.asks = self.connections = 0

    def get_request(self):  # type: ignore[no-untyped-def]
        self.connections += 1
        return super().get_request()


@pytest.fixture
def server() -> Iterator[CountingServer]:
    srv = CountingServer()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


def test_the_watch_asks_through_one_connection(server):
    """Every ask used to build a new HTTP client, and with it a TLS context (about 20 ms of CPU), every few seconds
    and at each failed request of the run's own; one client keeps one connection for them all."""
    url = f"http://127.0.0.1:{server.server_address[1]}/api"
    watch = PrefectWatch("run-watch", url, settings=None)
    try:
        for _ in range(3):
            assert watch.ask() is False
    finally:
        watch._done.set()  # never started: only closed
        watch.__exit__(None, None, None)
    assert (server.asks, server.connections) == (3, 1)
    assert watch.lost is None


SERVER = """
import sys
from http.server import ThreadingHTTPServer
sys.path.insert(0, sys.argv[1])
from test_prefect_watch import Health
srv = ThreadingHTTPServer(("127.0.0.1", 0), Health)
srv.asks = 0
print(srv.server_address[1], flush=True)
srv.serve_forever()
"""


def test_a_server_killed_is_a_miss_on_the_kept_connection():
    """The kept connection does not hide a server that died: its process killed, the next ask fails and counts."""
    child = subprocess.Popen([sys.executable, "-c", SERVER, str(Path(__file__).parent)], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        watch = PrefectWatch("run-watch-killed", f"http://127.0.0.1:{port}/api", settings=None)
        try:
            assert watch.ask() is False
            child.kill()
            child.wait(timeout=10)
            with pytest.raises(ConnectionError):
                watch.probe()
        finally:
            watch._done.set()
            watch.__exit__(None, None, None)
    finally:
        child.kill()
        child.wait(timeout=10)
