"""Suite-wide settings: no telemetry, loopback only, generous Prefect start-up on 2 cores."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
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
