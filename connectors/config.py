"""Client configuration: environment, then `.env`, then arguments in code.

`ServiceSettings` is the connector's own pydantic-settings class (VDS_*); the project's settings tree
(tasks/settings.py) composes it. `Settings` is what a client is built from.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from .retry import RetryPolicy

DEFAULT_TIMEOUT = httpx.Timeout(connect=5.0, read=30.0, write=10.0, pool=30.0)
# The real service's public address (both vendor SDKs use it): a key is all a user needs to give.
DEFAULT_BASE_URL = "https://api.carsxe.com"
# What runs and answers record as their service when the embedded sandbox answered: its port changes with every
# command, and its answers are made up, so it is named, not addressed.
EMBEDDED_SANDBOX = "embedded sandbox"
_embedded: set[str] = set()  # base URLs of the embedded sandboxes this process is running


@contextlib.contextmanager
def embedded_sandbox(url: str) -> Iterator[None]:
    """While the block runs, `url` is the embedded sandbox: `service_name` names it so (flows/target.py)."""
    _embedded.add(url)
    try:
        yield
    finally:
        _embedded.discard(url)


def service_name(base_url: str | None) -> str | None:
    """Which service `base_url` is, as runs and answers record it: EMBEDDED_SANDBOX, or the URL as
    scheme://host[:port][/path] (lower-case, no trailing slash), never a user, password, query or fragment
    (where a key could travel); None without a URL."""
    if not base_url:
        return None
    if base_url in _embedded:
        return EMBEDDED_SANDBOX
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme.lower()}://{host}{f':{port}' if port else ''}{parts.path.rstrip('/')}"


def _finite(least: float, strictly: bool = False) -> BeforeValidator:
    """A finite number (nan and inf are refused: a timeout of nan never fires), at or above `least`."""

    def check(value: Any) -> float | None:
        if value is None:
            return None
        number = float(value)  # a ValueError names the input
        if not math.isfinite(number) or number < least or (strictly and number == least):
            raise ValueError(f"{value!r} is out of range")
        return number

    return BeforeValidator(check)


# What each variable must be, in the one line that refuses it.
_EXPECTED = {"max_retries": "a whole number, e.g. 3", "max_retry_after": "a number of seconds, e.g. 60",
             "timeout": "a positive number of seconds"}


class ServiceSettings(BaseSettings):
    """`VDS_*` from the environment, else from `.env`; an empty value is unset."""

    model_config = SettingsConfigDict(env_prefix="VDS_", env_file=".env", extra="ignore", env_ignore_empty=True)

    api_key: Annotated[str | None, Field(repr=False, description=(
        "the service key (environment, or `.env` beside the `fleet.toml` in use or in the current folder; for "
        "deployments, else the Prefect Secret block `vds-api-key`); "
        "never logged, stored or passed to Prefect. Alone, it reaches the real service at "
        "`https://api.carsxe.com`"))] = None
    base_url: Annotated[str | None, Field(description=(
        "the service's base URL (default `https://api.carsxe.com` when a key is set; an http(s) URL)"))] = None
    max_retries: Annotated[int | None, Field(ge=0, description=(
        "transient retries per call (default 3: three 60 s Retry-Afters fit the 3-minute retry window)"))] = None
    max_retry_after: Annotated[float | None, _finite(0), Field(description=(
        "cap in seconds on a server's `Retry-After` (default 60); a finite number"))] = None
    timeout: Annotated[float | None, _finite(0, strictly=True), Field(description=(
        "seconds to wait for an answer once a request is sent (default 30; connecting has its own 5 s); "
        "a finite number above 0"))] = None

    @classmethod
    def describe(cls, exc: ValidationError) -> str:
        first = exc.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else "?"
        return f"VDS_{name.upper()} must be {_EXPECTED.get(name, 'valid')}, not {first.get('input')!r}"


@dataclass(frozen=True)
class Settings:
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    # Split timeouts, never library defaults: a slow read is not a dead host.
    timeout: httpx.Timeout = field(default_factory=lambda: DEFAULT_TIMEOUT)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_connections: int = 100
    transport: str = "http1"  # "http1" (connectors/http1.py), "aiohttp" or "httpx"; docs/connector.md has the measurements
    user_agent: str = "fleet-data/0.1"

    def __repr__(self) -> str:  # the dataclass repr would be fine, but say it explicitly
        key = "set" if self.api_key else "unset"
        return f"Settings(base_url={self.base_url!r}, api_key=<{key}>, transport={self.transport!r})"

    @classmethod
    def from_env(cls, env_file: str | Path | Sequence[str | Path] | None = ".env", **overrides: Any) -> Settings:
        """`ServiceSettings` (VDS_* from the environment, else `.env`) as a client's settings.

        `env_file`: one file or several, a later one winning (missing ones are skipped). With a key and no
        base URL, the public service (`DEFAULT_BASE_URL`); with neither, nothing is configured (commands
        then use the embedded sandbox). Raises ValueError naming a variable that cannot be used.
        """
        files = [env_file] if isinstance(env_file, (str, Path)) else list(env_file or [])
        found = tuple(Path(f) for f in files if f and Path(f).is_file())
        try:
            read = ServiceSettings(_env_file=found or None)
        except ValidationError as exc:
            raise ValueError(ServiceSettings.describe(exc)) from None
        settings = cls(api_key=read.api_key, base_url=read.base_url or (DEFAULT_BASE_URL if read.api_key else None))
        if read.max_retries is not None:
            settings = replace(settings, retry=replace(settings.retry, max_retries=read.max_retries))
        if read.max_retry_after is not None:
            settings = replace(settings, retry=replace(settings.retry, max_retry_after=read.max_retry_after))
        if read.timeout is not None:
            settings = replace(settings, timeout=httpx.Timeout(connect=DEFAULT_TIMEOUT.connect, read=read.timeout,
                                                               write=DEFAULT_TIMEOUT.write, pool=DEFAULT_TIMEOUT.pool))
        return replace(settings, **{k: v for k, v in overrides.items() if v is not None})

    @property
    def configured(self) -> bool:
        """True when the user pointed us at a service (otherwise commands use the sandbox)."""
        return bool(self.api_key or self.base_url)

    @property
    def service(self) -> str:
        """The service these settings call, as runs and answers record it (`service_name`); a command with
        nothing configured calls the embedded sandbox."""
        if not self.configured:
            return EMBEDDED_SANDBOX
        return service_name(self.base_url or DEFAULT_BASE_URL) or EMBEDDED_SANDBOX


class ServiceAccess(BaseModel):
    """A client's settings as a value another process takes (a fetch task on a `--workers` process or a Dask
    worker): the flow's own, so a worker needs no VDS_* of its own. The key is a `SecretStr`: Prefect, Dask and
    any log show it as `**********`; only `settings()` (where the client is built) reads it."""

    model_config = ConfigDict(frozen=True)

    api_key: SecretStr | None = None
    base_url: str | None = None
    read_timeout: float = DEFAULT_TIMEOUT.read or 30.0
    max_retries: int = RetryPolicy.max_retries
    max_retry_after: float = RetryPolicy.max_retry_after

    @classmethod
    def of(cls, settings: Settings) -> ServiceAccess:
        return cls(api_key=SecretStr(settings.api_key) if settings.api_key else None, base_url=settings.base_url,
                   read_timeout=settings.timeout.read or DEFAULT_TIMEOUT.read or 30.0,
                   max_retries=settings.retry.max_retries, max_retry_after=settings.retry.max_retry_after)

    def settings(self) -> Settings:
        """The client's settings, as `Settings.from_env` made them in the flow's process."""
        base = Settings()
        return replace(base, api_key=self.api_key.get_secret_value() if self.api_key else None, base_url=self.base_url,
                       timeout=httpx.Timeout(connect=DEFAULT_TIMEOUT.connect, read=self.read_timeout,
                                             write=DEFAULT_TIMEOUT.write, pool=DEFAULT_TIMEOUT.pool),
                       retry=replace(base.retry, max_retries=self.max_retries, max_retry_after=self.max_retry_after))
