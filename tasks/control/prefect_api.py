"""The Prefect API watched while a run goes on: a server lost mid-run halts the run, one line, exit code 9.

A run needs Prefect's API only to say how it goes (task runs, logs, the summary artifact, the flow run's end);
its calls and landing need none of it. Left to Prefect, a server killed mid-run ended the command minutes
later (each request retried with back-off, then every queued event and log tried again at exit) with 100 KB
of tracebacks, as a bug. So the flow's process asks `/health` every few seconds; when the API has not
answered `MISSES` asks in a row (or at once, when a request of the run's own to it just failed), the run is
halted as for any lost service (tasks/control/services.py): no new call starts, what was fetched lands and
is published, the run is recorded `failed` saying so. From then on Prefect's own client is let go: no more
retries, no logs sent, its terminal lines held back (they would only repeat the loss), and `fleet` does not
wait at exit for what it would still send (flows/cli/__init__.py). Prefect's temporary server, with no
PREFECT_API_URL, is watched the same way: the command's own child, but one the machine can kill.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, TypeVar

from fleet_data.tasks.control import quiet
from fleet_data.tasks.control.services import AGAIN, INTERVAL, ServiceWatch

F = TypeVar("F", bound=Callable[..., Any])
BUSY_SECONDS = 30.0  # how long a server that took the connection may take to answer /health


def shown_url(url: str) -> str:
    import httpx

    return str(httpx.URL(url).copy_with(userinfo=b""))  # never a password the URL may carry


def lost_line(url: str, since: datetime, why: str, temporary: bool = False) -> str:
    api = f"Prefect's {_local_server()} server at {url}" if temporary else f"the Prefect API at {shown_url(url)}"
    return (f"{api} stopped answering during the run (since {since:%H:%M:%S} UTC: {why}): "
            f"the run stopped calling and published what it landed; {AGAIN}")


def let_prefect_go(settings: Any) -> None:
    """Prefect's client in this process, told its server is gone: the live settings object every thread reads
    (a settings context entered in one thread cannot reach the threads already calling)."""
    settings.client.max_retries = 0
    settings.logging.to_api.enabled = False
    logging.raiseExceptions = False  # Prefect's log sender says each batch it could not send on stderr otherwise
    quiet.prefect_lost()


class PrefectWatch(ServiceWatch):
    """The Prefect API's `/health`, asked."""

    name = "prefect-watch"

    def __init__(self, run_id: str, url: str, settings: Any, temporary: bool = False):
        import httpx

        super().__init__(run_id)
        self.url, self.settings, self.temporary = url, settings, temporary
        # One client, and its connection, for every ask: a new one costs a TLS context (about 20 ms of CPU).
        self._client = httpx.Client(timeout=httpx.Timeout(BUSY_SECONDS, connect=INTERVAL))

    def probe(self) -> None:
        import httpx

        try:
            self._client.get(self.url.rstrip("/") + "/health")
        except httpx.HTTPError as exc:
            raise ConnectionError(type(exc).__name__) from exc

    def is_miss(self, exc: Exception) -> bool:
        """A server that took the connection but is slow to answer is busy, not gone: only a refused or unmade
        connection (or one cut) counts."""
        return str(exc) != "ReadTimeout"

    def line(self, since: datetime, why: str) -> str:
        return lost_line(self.url, since, why, self.temporary)

    def on_lost(self) -> None:
        let_prefect_go(self.settings)

    def __enter__(self) -> "PrefectWatch":
        with _guard:
            _watches[self.run_id] = self
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        with _guard:
            _watches.pop(self.run_id, None)
        self._client.close()  # an ask in flight then fails, and after `stop` halts nothing


_guard = threading.Lock()
_watches: dict[str, PrefectWatch] = {}


def lost_now(run_id: str) -> bool:
    """A request of the run's own to Prefect failed: is its API gone? Asked at once, not after the watch's wait."""
    with _guard:
        watch = _watches.get(run_id)
    return watch is not None and (watch.lost is not None or watch.ask(misses=1))


def watched(fn: F) -> F:
    """A flow function whose `run_id` argument names its run, run with Prefect's API watched (`watching_prefect`)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        run_id = bound.arguments.get("run_id")
        with watching_prefect(run_id) if run_id else contextlib.nullcontext():
            return fn(*args, **kwargs)

    return run  # type: ignore[return-value]


@contextlib.contextmanager
def watching_prefect(run_id: str) -> Iterator[PrefectWatch | None]:
    """Watch the Prefect server the flow reports to (PREFECT_API_URL) for the block, or Prefect's temporary server
    this process started: a child of the command, which the machine can still kill (its OOM killer) and which a
    run must then not wait for, retrying, for minutes."""
    from prefect.settings import PREFECT_API_URL, get_current_settings

    url = PREFECT_API_URL.value() or temporary_server_url()
    if not url:
        yield None
        return
    temporary = url == _local_api or not PREFECT_API_URL.value()  # ours, started by this command
    with PrefectWatch(run_id, url, get_current_settings(), temporary) as watch:
        yield watch


def _local_server() -> str:
    """What the server a command without PREFECT_API_URL uses is called: `temporary` or `shared`."""
    from fleet_data.tasks.settings import SettingsError, process_settings

    try:
        return process_settings().prefect_server
    except SettingsError:  # said where the command reads it; here the loss is what matters
        return "temporary"


_local_api: str | None = None


def local_server_started(url: str) -> None:
    """`url` is the Prefect server this command started or joined, now its PREFECT_API_URL (flows/processes.py,
    `use_local_api`): a run's lost-server line names it as the command's own server."""
    global _local_api
    _local_api = url


def temporary_server_url() -> str | None:
    """The API of a temporary server Prefect started itself in this process (where no death signal let the command
    start one: flows/processes.py), if one runs; None otherwise, without loading Prefect's server module."""
    module = sys.modules.get("prefect.server.api.server")
    if module is None:
        return None
    server = module.SubprocessASGIServer()  # Prefect's one temporary server of this process (flows/processes.py)
    return server.api_url if server.running else None
