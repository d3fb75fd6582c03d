"""A service the run depends on, other than the Vehicle Data Service, lost during the run: an environment fault.

The object store of `--staging`, the Prefect API, a Dask scheduler or every worker: each is the machine's
circumstance, not the input's and not a bug. When one stops answering, the run is halted as for a full disk
(tasks/control/resources.py, kind SERVICE_LOST): no new call starts, what was fetched lands (or stays staged
for the next run), the run is recorded `failed` with one line saying which service and what to do, and
`fleet` ends with exit code 9. Unlike a full disk, the store is sound: the run publishes what it landed.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone

from fleet_data.tasks.control.resources import SERVICE_LOST, ResourceLost, halt

AGAIN = "run again once it answers: nothing paid is bought twice"
INTERVAL = 5.0  # seconds between a watch's asks, and each ask's timeout
MISSES = 3  # asks in a row without an answer: the service is lost (15-30 s after it went)
# botocore's errors for a request that got no answer (s3fs raises them as they are); the names, so that a
# run without the S3 extra needs none of it.
_NO_ANSWER = frozenset({"EndpointConnectionError", "ConnectionClosedError", "ConnectTimeoutError",
                        "ReadTimeoutError", "ProxyConnectionError", "HTTPClientError"})


def no_answer(exc: BaseException | None) -> BaseException | None:
    """The error in `exc` or its causes that says a server did not answer (refused, reset, timed out), if any."""
    seen = 0
    while exc is not None and seen < 8:  # bounded: a cause chain may loop
        if isinstance(exc, (ConnectionError, TimeoutError)) or any(
                kind.__name__ in _NO_ANSWER and kind.__module__.startswith("botocore") for kind in type(exc).__mro__):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def one_line(exc: BaseException) -> str:
    """The error's kind and where it was going (botocore names the whole object's URL: its host is enough)."""
    url = str((getattr(exc, "kwargs", None) or {}).get("endpoint_url") or "")
    if url:
        return f"{type(exc).__name__} at {'/'.join(url.split('/', 3)[:3])}"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:160]}" if text else type(exc).__name__


def object_store_lost(location: str, exc: BaseException) -> ResourceLost | None:
    """The halt for an object-store call on `location` that got no answer; None for any other error."""
    cause = no_answer(exc)
    if cause is None:
        return None
    bucket = "/".join(location.split("/", 3)[:3])
    return ResourceLost(f"the object store of {bucket} stopped answering ({one_line(cause)}): the run stopped calling; "
                        "what was fetched lands at the next run with the same --staging, from the bucket or this "
                        f"machine's scratch folder; {AGAIN}", SERVICE_LOST)


class ServiceWatch:
    """Asks a service the run depends on every `INTERVAL` seconds, in a thread, while the run goes on; after `MISSES`
    asks in a row without an answer, halts the run (SERVICE_LOST) with `line`. A subclass says how to ask
    (`probe`, raising when there is no answer), what to say (`line`) and what else to do then (`on_lost`)."""

    name = "service-watch"

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.lost: str | None = None
        self._misses, self._since = 0, datetime.now(timezone.utc)
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name=self.name, daemon=True)

    def probe(self) -> None:
        raise NotImplementedError

    def line(self, since: datetime, why: str) -> str:
        raise NotImplementedError

    def on_lost(self) -> None:
        """Called once, before the run is halted."""

    def is_miss(self, exc: Exception) -> bool:
        """Whether `probe` raising `exc` says the service is gone (a subclass tells a busy one apart)."""
        return True

    def ask(self, misses: int = MISSES) -> bool:
        """Ask once; True once the service is lost (after `misses` asks in a row without an answer)."""
        try:
            self.probe()
        except Exception as exc:  # noqa: BLE001 - a failure to answer; `is_miss` says whether it counts
            if not self.is_miss(exc):
                return False
            with self._lock:
                self._since = self._since if self._misses else datetime.now(timezone.utc)
                self._misses += 1
                if self._misses >= misses and self.lost is None and not self._done.is_set():
                    self.lost = self.line(self._since, str(exc) or type(exc).__name__)
                    self.on_lost()
                    halt(self.run_id, self.lost, SERVICE_LOST)
            return self.lost is not None
        with self._lock:
            self._misses = 0
        return False

    def _watch(self) -> None:
        while not self._done.wait(INTERVAL):
            if self.ask():
                return

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """No more asks; an ask in flight is not waited for (a stopping run must end in seconds): it halts nothing."""
        self._done.set()
