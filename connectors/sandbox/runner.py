"""Starting and stopping a sandbox: in a background thread (tests, CLI) or as a child process.

Both give a `Sandbox` handle whose methods go through the /_sandbox/ admin routes, so they
work the same whichever way the server runs.
"""
from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Iterator

import httpx
from aiohttp import web

from .accounts import Account
from .config import SandboxConfig
from .faults import FaultConfig
from .server import create_app

STARTUP_TIMEOUT_SECONDS = 15
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


class Sandbox:
    """A running sandbox: its `url`, and admin methods for tests."""

    def __init__(self, url: str, *, stopper=None, process: subprocess.Popen | None = None):
        self.url = url
        self._stopper = stopper
        self.process = process
        self._admin = httpx.Client(base_url=url, timeout=10, trust_env=False)

    # -- admin ---------------------------------------------------------------
    def stats(self) -> dict:
        return self._admin_call("GET", "/_sandbox/stats")

    def reset_stats(self) -> None:
        self._admin_call("POST", "/_sandbox/reset")

    def set_faults(self, faults: FaultConfig) -> None:
        self._admin_call("POST", "/_sandbox/faults", json=faults.to_dict())

    def add_account(self, key: str, account: Account) -> None:
        self._admin_call("POST", "/_sandbox/accounts", json={"key": key, **asdict(account)})

    def webhooks(self) -> list[dict]:
        return self._admin_call("GET", "/_sandbox/webhooks")["deliveries"]

    def set_batch_rate(self, vins_per_second: float) -> None:
        self._admin_call("POST", "/_sandbox/settings", json={"batch_vins_per_second": vins_per_second})

    def record_journal(self, on: bool = True) -> None:
        self._admin_call("POST", "/_sandbox/settings", json={"journal": on})

    def journal(self) -> list[dict]:
        """Every call since the journal was switched on (or the last reset), in the order answered."""
        return self._admin_call("GET", "/_sandbox/journal")["calls"]

    def set_vehicle(self, vin: str, **overrides) -> dict:
        """Tell the sandbox this vehicle changed (connectors/sandbox/control.py); returns its overrides."""
        return self._admin_call("POST", f"/_sandbox/vehicles/{vin}", json=overrides)

    def vehicle(self, vin: str) -> dict:
        return self._admin_call("GET", f"/_sandbox/vehicles/{vin}")

    def clear_vehicles(self, vin: str | None = None) -> None:
        """Forget one VIN's overrides, or every VIN's: the generated answers come back."""
        self._admin_call("DELETE", f"/_sandbox/vehicles/{vin}" if vin else "/_sandbox/vehicles")

    def peak_in_flight(self) -> int:
        """Most calls the sandbox was serving at once since the last reset."""
        return self.stats()["peak_in_flight"]

    def count(self, endpoint: str | None = None, *, key: str | None = None, status: int | None = None) -> int:
        """How many calls matched, from stats (None = any)."""
        return sum(r["count"] for r in self.stats()["requests"]
                   if (endpoint is None or r["endpoint"] == endpoint) and (key is None or r["key"] == key)
                   and (status is None or r["status"] == status))

    def units(self, key: str, api: str | None = None) -> int:
        return sum(u["units"] for u in self.stats()["units"]
                   if u["key"] == key and (api is None or u["api"] == api))

    def _admin_call(self, method: str, path: str, **kwargs) -> dict:
        answer = self._admin.request(method, path, **kwargs)
        answer.raise_for_status()
        return answer.json()

    # -- lifecycle -----------------------------------------------------------
    def stop(self) -> None:
        self._admin.close()
        if self._stopper is not None:
            self._stopper()
            self._stopper = None
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @classmethod
    def start_subprocess(cls, config_args: list[str] | None = None, port: int = 0,
                         host: str = "127.0.0.1") -> "Sandbox":
        """Run `python -m fleet_data.connectors.sandbox` as a child; its first stdout line names the URL."""
        command = [sys.executable, "-m", "fleet_data.connectors.sandbox", "--host", host, "--port", str(port),
                   *(config_args or [])]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line_holder: list[str] = []
        stdout = process.stdout
        assert stdout is not None  # stdout=PIPE
        reader = threading.Thread(target=lambda: line_holder.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(STARTUP_TIMEOUT_SECONDS)
        line = line_holder[0].strip() if line_holder else ""
        if not line.startswith("SANDBOX_URL="):
            process.kill()
            process.wait(timeout=5)
            raise RuntimeError(f"sandbox subprocess did not start (first line: {line!r})")
        return cls(line.split("=", 1)[1], process=process)


async def start_site(config: SandboxConfig | None, host: str, port: int) -> tuple[web.AppRunner, str]:
    # No access log: keys travel in query strings. Cancel handlers whose client hung up (timeout faults).
    runner = web.AppRunner(create_app(config), access_log=None, handler_cancellation=True,
                           shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    bound_host, bound_port = runner.addresses[0][:2]
    return runner, f"http://{bound_host}:{bound_port}"


@contextlib.contextmanager
def run_sandbox(config: SandboxConfig | None = None, *, port: int = 0, host: str = "127.0.0.1") -> Iterator[Sandbox]:
    """Serve a sandbox from a background thread with its own event loop; stopped on exit."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    outcome: dict = {}

    def serve() -> None:
        asyncio.set_event_loop(loop)
        try:
            outcome["runner"], outcome["url"] = loop.run_until_complete(start_site(config, host, port))
        except BaseException as exc:  # surfaced to the caller below
            outcome["error"] = exc
            started.set()
            return
        started.set()
        loop.run_forever()
        loop.run_until_complete(outcome["runner"].cleanup())
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()

    thread = threading.Thread(target=serve, name="sandbox", daemon=True)
    thread.start()
    started.wait(STARTUP_TIMEOUT_SECONDS)
    if "url" not in outcome:
        raise RuntimeError(f"sandbox did not start: {outcome.get('error')!r}")

    def stopper() -> None:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(15)

    sandbox = Sandbox(outcome["url"], stopper=stopper)
    try:
        yield sandbox
    finally:
        sandbox.stop()
