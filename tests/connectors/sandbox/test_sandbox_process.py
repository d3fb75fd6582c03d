"""The sandbox as a child process: started by URL line, driven by admin routes, silent about keys."""
from __future__ import annotations

import subprocess
import sys

import httpx

from fleet_data.connectors.sandbox import FaultConfig, Sandbox
from fleet_data.connectors.sandbox.runner import _PROJECT_ROOT

from .sandbox_http import VIN, get


def test_subprocess_mode_with_cli_flags():
    sandbox = Sandbox.start_subprocess(["--fault-rate", "1", "--fault-statuses", "502", "--seed", "3"])
    try:
        assert sandbox.url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=sandbox.url, trust_env=False) as http:
            assert get(http, "/specs", vin=VIN).status_code == 502
            sandbox.set_faults(FaultConfig())
            assert get(http, "/specs", vin=VIN).status_code == 200
        assert sandbox.count("/specs") == 2
    finally:
        sandbox.stop()
    assert sandbox.process.poll() is not None


def test_the_process_never_prints_keys():
    secret = "sk-live-SANDBOX-SECRET-1234"
    process = subprocess.Popen([sys.executable, "-m", "fleet_data.connectors.sandbox", "--port", "0"], cwd=str(_PROJECT_ROOT),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first_line = process.stdout.readline()
        assert first_line.startswith("SANDBOX_URL=http://127.0.0.1:")
        url = first_line.strip().split("=", 1)[1]
        with httpx.Client(base_url=url, trust_env=False) as http:
            assert get(http, "/specs", key=secret, vin=VIN).status_code == 200
            assert get(http, "/specs", key=secret, vin="BAD").status_code == 400
            assert get(http, "/nowhere", key=secret).status_code == 404
            assert http.post("/v1/vinocr", params={"key": secret}, content=b"{").status_code == 400
    finally:
        process.terminate()
        out, err = process.communicate(timeout=10)
    assert secret not in out and secret not in err
    assert out == ""  # nothing after the URL line
