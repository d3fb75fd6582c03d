"""Which service a command talks to: the configured one, or the embedded sandbox.

With neither `VDS_API_KEY` nor `VDS_BASE_URL` set, commands start the sandbox on
a free loopback port and say so in one line, so everything runs on a fresh machine.
The target is published through the environment, which is where tasks read their
settings from: the key never becomes a flow or task parameter.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import replace
from typing import Iterator

from fleet_data.connectors import Settings
from fleet_data.connectors.config import embedded_sandbox
from fleet_data.tasks.settings import client_settings, exported

SANDBOX_KEY = "sandbox_demo_key"


@contextlib.contextmanager
def service_settings(settings: Settings | None = None, *, announce: bool = True) -> Iterator[Settings]:
    settings = settings or client_settings()
    if settings.configured:  # a key alone means the public service: `from_env` fills in its base URL
        yield settings
        return
    from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox

    # On loopback the sandbox may call back a local webhook receiver over plain HTTP.
    with run_sandbox(SandboxConfig(insecure_webhooks=True)) as sandbox:
        if announce:
            print(f"No VDS_API_KEY/VDS_BASE_URL set: using the embedded sandbox at {sandbox.url}", file=sys.stderr)
        # Where the tasks (and worker processes) read the service's settings, for the command's length; runs
        # and answers record it as the embedded sandbox, not as its address of the moment.
        with exported(VDS_API_KEY=SANDBOX_KEY, VDS_BASE_URL=sandbox.url), embedded_sandbox(sandbox.url):
            yield replace(settings, base_url=sandbox.url, api_key=SANDBOX_KEY)
