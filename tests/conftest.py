"""Suite-wide settings: no telemetry, loopback only, generous Prefect start-up on 2 cores."""

import os

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
# A developer's real key must never reach tests: they talk to the sandbox or a mock.
os.environ.pop("VDS_API_KEY", None)
os.environ.pop("VDS_BASE_URL", None)
