"""Prefect's terminal lines for an environment fault, held back: the command says it once, in one line.

A fault met inside a flow (a lake folder made read-only mid-run, a fleet file moved away) makes Prefect log the
task's and the flow's failure, with tracebacks, on the terminal, before flows/cli.py prints its one line
(`error: <path>: ...`, exit 2). This filter, on the terminal's handlers only, drops those records: the
Prefect server still gets every log, and `-v` shows everything.
"""

from __future__ import annotations

import logging

from fleet_data.tasks.control.faults import as_fault


def users_to_fix(exc: BaseException) -> bool:
    """An environment fault, or a fleet file that became unreadable after the command first read it."""
    from fleet_data.tasks.ingest.fleet_files import FleetFileError

    return isinstance(exc, FleetFileError) or as_fault(exc) is not None


class HideFaultTracebacks(logging.Filter):
    """Drops Prefect's ERROR records about an environment fault (and the state lines that repeat it)."""

    def __init__(self) -> None:
        super().__init__()
        self.faults: set[str] = set()  # what the faults said: Prefect's "Finished in state Failed(...)" repeats it

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR or not record.name.startswith("prefect"):
            return True
        if record.exc_info and record.exc_info[1] is not None and users_to_fix(record.exc_info[1]):
            self.faults.add(str(record.exc_info[1]))
            return False
        message = record.getMessage()
        return not any(fault in message for fault in self.faults)


def hide_fault_tracebacks(verbose: bool) -> None:
    """Install the filter on the root logger's handlers (Prefect's console handler among them); once."""
    if verbose:
        return
    from prefect.logging.configuration import PROCESS_LOGGING_CONFIG, setup_logging

    if not PROCESS_LOGGING_CONFIG:  # Prefect adds its console handler when first set up: first, then filter
        setup_logging()
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, HideFaultTracebacks) for f in handler.filters):
            handler.addFilter(HideFaultTracebacks())
