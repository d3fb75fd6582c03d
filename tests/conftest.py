"""Suite-wide settings: no telemetry, loopback only, generous Prefect start-up on 2 cores."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
# A developer's real key must never reach tests: they talk to the sandbox or a mock.
os.environ.pop("VDS_API_KEY", None)
os.environ.pop("VDS_BASE_URL", None)
# Prefect's home (its profiles, result storage, ephemeral database) is private to the test session:
# tests never touch the developer's ~/.prefect, and the secrets test can scan all Prefect wrote.
if "PREFECT_HOME" not in os.environ:
    _home = tempfile.mkdtemp(prefix="fleet-tests-prefect-")
    os.environ["PREFECT_HOME"] = _home
    atexit.register(shutil.rmtree, _home, True)
