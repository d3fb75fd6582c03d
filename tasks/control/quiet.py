"""Prefect's terminal lines for an environment fault, held back: the command says it once, in one line.

A fault met inside a flow (a lake folder made read-only mid-run, a fleet file moved away, the object store of
`--staging` gone) makes Prefect log the task's and the flow's failure, with tracebacks, on the terminal,
before `fleet` prints its one line (`error: ...`, its exit code). This filter, on the terminal's handlers
only, drops those records: the Prefect server still gets every log, and `-v` shows everything. `fleet`
installs it in its own process (flows/quiet_faults.py); the fetch processes of `--workers` are told so by
the flow (tasks/steps/refresh_tasks.py `FetchAccess.quiet`) and install it too.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from fleet_data.tasks.control.faults import as_fault
from fleet_data.tasks.errors import FleetError
from fleet_data.tasks.exitcodes import BUG

UNSENT_EVENT = "Service 'EventsWorker' failed to process item"  # Prefect's events worker, its server away
_hiding = threading.Event()  # installed in this process (`fleet` without -v, or told so by the flow)
_prefect_lost = threading.Event()  # the Prefect API was lost (tasks/control/prefect_api.py): its lines only repeat it


def prefect_lost() -> None:
    """From now on Prefect's own lines stay off the terminal: what it would say is that its server is gone."""
    _prefect_lost.set()


def is_prefect_lost() -> bool:
    return _prefect_lost.is_set()


class HideLostConnections(logging.Filter):
    """Drops a client library's records of a connection it lost (refused, closed, its reconnect cancelled): when
    the service is gone for good, the command says so once (tasks/control/services.py); a passing blip needs
    no traceback either."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        seen = 0
        while exc is not None and seen < 8:
            if isinstance(exc, (OSError, asyncio.CancelledError)) or type(exc).__name__ == "CommClosedError":
                return False
            exc, seen = exc.__cause__ or exc.__context__, seen + 1
        return True


def hide_lost_connections(logger: str) -> None:
    """`HideLostConnections` on `logger`, where `fleet` hides fault tracebacks (not with -v); once."""
    target = logging.getLogger(logger)
    if _hiding.is_set() and not any(isinstance(f, HideLostConnections) for f in target.filters):
        target.addFilter(HideLostConnections())


def silence(logger: str) -> None:
    """A lost service's client library (Dask's) logs its reconnects and their cancelling with tracebacks; the
    command says the loss once. Only where `fleet` hides fault tracebacks (not with -v)."""
    if not _hiding.is_set():
        return
    for name in [logger, *(n for n in logging.Logger.manager.loggerDict if n.startswith(logger + "."))]:
        logging.getLogger(name).setLevel(logging.CRITICAL)  # its children may have levels of their own


def users_to_fix(exc: BaseException) -> bool:
    """One of our errors that is not a bug (a fleet file unreadable since the command read it, a full disk, a lost
    service: each said in one line with its code), or an environment fault."""
    return isinstance(exc, FleetError) and exc.code != BUG or as_fault(exc) is not None


class HideFaultTracebacks(logging.Filter):
    """Drops Prefect's ERROR records about an environment fault (and the state lines that repeat it)."""

    def __init__(self) -> None:
        super().__init__()
        self.faults: set[str] = set()  # what the faults said: Prefect's "Finished in state Failed(...)" repeats it

    def filter(self, record: logging.LogRecord) -> bool:
        if _prefect_lost.is_set() and record.name.startswith("prefect"):
            return False
        if record.levelno < logging.ERROR or not record.name.startswith("prefect"):
            return True
        if record.exc_info and record.exc_info[1] is not None and users_to_fix(record.exc_info[1]):
            self.faults.add(str(record.exc_info[1]))
            return False
        message = record.getMessage().replace("\\'", "'")  # a state's repr escapes the fault's quotes
        if message.startswith(UNSENT_EVENT):  # a whole event's repr per event, after the events client's own warning
            return False
        return not any(fault in message for fault in self.faults)


def install() -> None:
    """The filter on the terminal's handlers (Prefect's console handlers); once per handler."""
    from prefect.logging.configuration import PROCESS_LOGGING_CONFIG, setup_logging

    _hiding.set()
    if not PROCESS_LOGGING_CONFIG:  # Prefect adds its console handler when first set up: first, then filter
        setup_logging()
    # The root's console handler, and `prefect._internal`'s own (its services' errors do not propagate).
    for handler in logging.getLogger().handlers + logging.getLogger("prefect._internal").handlers:
        if isinstance(handler, logging.StreamHandler) and not any(isinstance(f, HideFaultTracebacks)
                                                                  for f in handler.filters):
            handler.addFilter(HideFaultTracebacks())


def hiding() -> bool:
    """Whether this process holds fault tracebacks back (`install`): what the flow tells its fetch processes."""
    return _hiding.is_set()
