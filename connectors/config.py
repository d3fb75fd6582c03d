"""Client configuration: environment, then `.env`, then arguments in code."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
from dotenv import dotenv_values

from .retry import RetryPolicy

DEFAULT_TIMEOUT = httpx.Timeout(connect=5.0, read=30.0, write=10.0, pool=30.0)
DEFAULT_BASE_URL = "https://api.carsxe.com"  # the real service's public base URL (both vendor SDKs use it)


@dataclass(frozen=True)
class Settings:
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    # Split timeouts, never library defaults: a slow read is not a dead host.
    timeout: httpx.Timeout = field(default_factory=lambda: DEFAULT_TIMEOUT)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_connections: int = 100
    transport: str = "aiohttp"  # "aiohttp" (httpx-aiohttp) or "httpx"; see README for the measurement
    user_agent: str = "fleet-data/0.1"

    def __repr__(self) -> str:  # the dataclass repr would be fine, but say it explicitly
        key = "set" if self.api_key else "unset"
        return f"Settings(base_url={self.base_url!r}, api_key=<{key}>, transport={self.transport!r})"

    @classmethod
    def from_env(cls, env_file: str | Path | None = ".env", **overrides: object) -> "Settings":
        """Read `VDS_API_KEY` and `VDS_BASE_URL` (default: the public service's, when a key is set) from the
        environment, else from `.env`.

        Also `VDS_MAX_RETRIES` (transient retries per call), `VDS_MAX_RETRY_AFTER` (cap, in
        seconds, on how long a server-sent Retry-After is honoured) and `VDS_TIMEOUT` (seconds to
        wait for an answer once the request is sent; connecting keeps its own 5 s).
        """
        file_values = dotenv_values(env_file) if env_file and Path(env_file).is_file() else {}

        def pick(name: str) -> str | None:
            return os.environ.get(name) or file_values.get(name) or None

        # A key alone means the real service; neither means none is configured (commands use the sandbox).
        settings = cls(api_key=pick("VDS_API_KEY"),
                       base_url=pick("VDS_BASE_URL") or (DEFAULT_BASE_URL if pick("VDS_API_KEY") else None))
        retry = {}
        if pick("VDS_MAX_RETRIES"):
            retry["max_retries"] = int(pick("VDS_MAX_RETRIES") or 0)
        if pick("VDS_MAX_RETRY_AFTER"):
            retry["max_retry_after"] = float(pick("VDS_MAX_RETRY_AFTER") or 0)
        if retry:
            settings = replace(settings, retry=replace(settings.retry, **retry))
        if pick("VDS_TIMEOUT"):
            try:
                read = float(pick("VDS_TIMEOUT") or 0)
            except ValueError:
                read = 0.0
            if read <= 0:
                raise ValueError(f"VDS_TIMEOUT must be a positive number of seconds, not {pick('VDS_TIMEOUT')!r}")
            settings = replace(settings, timeout=httpx.Timeout(connect=DEFAULT_TIMEOUT.connect, read=read,
                                                               write=DEFAULT_TIMEOUT.write, pool=DEFAULT_TIMEOUT.pool))
        return replace(settings, **{k: v for k, v in overrides.items() if v is not None})

    @property
    def configured(self) -> bool:
        """True when the user pointed us at a service (otherwise commands use the sandbox)."""
        return bool(self.api_key or self.base_url)
