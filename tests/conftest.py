"""Suite-wide settings: no telemetry, loopback only, generous Prefect start-up on 2 cores."""

import atexit
import os
import shutil
import signal
import tempfile
import time
import warnings

import psutil
import pytest

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
# Each command a test runs without PREFECT_API_URL starts a Prefect server of its own, which ends with it. The
# shared one (the default) would outlive the test by ten minutes and serve the next tests with the environment of
# the first (a fake clock, say): tests/flows/test_shared_prefect.py asks for it by name.
os.environ.setdefault("FLEET_PREFECT_SERVER", "temporary")
# A test's Prefect server (SQLite) answers 503 while its database is locked; at load 25-36 (the suite beside
# other work) a child refresh once exhausted Prefect's 5 client retries (2+4+8+16+32 s) creating its flow run.
# Two more retries (+64, +128 s) are what a loaded box needs; the tests assert nothing about Prefect's uptime.
os.environ.setdefault("PREFECT_CLIENT_MAX_RETRIES", "7")
# A developer's real key must never reach tests: they talk to the sandbox or a mock.
os.environ.pop("VDS_API_KEY", None)
os.environ.pop("VDS_BASE_URL", None)
# Prefect's home (its profiles, result storage, ephemeral database) is private to the test session:
# tests never touch the developer's ~/.prefect, and the secrets test can scan all Prefect wrote.
# One per process, so each pytest-xdist worker has its own: a home set here and inherited from the process
# that started this one (FLEET_TESTS_PREFECT_HOME) is replaced; a home the developer set is kept.
if "PREFECT_HOME" not in os.environ or os.environ["PREFECT_HOME"] == os.environ.get("FLEET_TESTS_PREFECT_HOME"):
    _home = tempfile.mkdtemp(prefix="fleet-tests-prefect-")
    os.environ["PREFECT_HOME"] = os.environ["FLEET_TESTS_PREFECT_HOME"] = _home
    atexit.register(shutil.rmtree, _home, True)


_SESSION_START = time.time()


@pytest.fixture(scope="session", autouse=True)
def no_shared_prefect_server_left(tmp_path_factory):
    """A test whose command's environment dropped FLEET_PREFECT_SERVER joined the shared server, which outlives it:
    any started in this session under its folders is stopped at its end (the supervisor leads its own process
    group, Prefect's server with it), and named in a warning, so that the test can be told."""
    yield
    roots = [os.environ["PREFECT_HOME"], str(tmp_path_factory.getbasetemp())]
    left = []
    for process in psutil.process_iter(["cmdline", "create_time"]):
        command = process.info["cmdline"] or []
        if "fleet_data.flows.shared_prefect" not in command or "--folder" not in command[:-1]:
            continue
        folder = command[command.index("--folder") + 1]
        if process.info["create_time"] >= _SESSION_START - 1 and any(folder.startswith(root) for root in roots):
            left.append(folder)
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass
    if left:
        warnings.warn(f"shared Prefect servers left running by tests, stopped: {left}", stacklevel=1)
