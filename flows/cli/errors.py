"""How a command ended, as one line and an exit code: the one place `fleet` turns an error into both.

Our own errors carry their code (tasks/errors.py draws the tree, tasks/exitcodes.py holds the table).
What the machine or the OS raised is translated here: a full disk (6), an allocation refused (8), a path
or file the user must fix (2, tasks/control/faults.py). Anything else is a bug (1), said in one line
(`-v` shows the traceback). A finished run's code comes from its summary instead (flows/outcome.py).
"""

from __future__ import annotations

import json
import logging
import sys

from fleet_data.tasks.errors import FleetError, UsageError
from fleet_data.tasks.exitcodes import BUG, KINDS, NO_MEMORY, NO_SPACE, USAGE


def print_error(message: str, code: int, as_json: bool) -> int:
    """One line: `error: ...` on stderr, or with --json `{"error": {...}}` on stdout (where the summary goes)."""
    if as_json:
        print(json.dumps({"error": {"code": code, "kind": KINDS.get(code, "error"), "message": message}}), flush=True)
    else:
        print(f"error: {message}", file=sys.stderr, flush=True)
    return code


def ended(exc: BaseException, command: str) -> tuple[int, str] | None:
    """(exit code, one line) for an error that is not a bug: ours by its `code`, the machine's or the
    environment's translated; None for a bug."""
    from fleet_data.tasks.control.faults import as_fault

    if isinstance(exc, UsageError):  # the user fixes it: checked first, whatever caused it
        return exc.code, str(exc)
    machine = machine_fault(exc)  # a full disk, the store or lock gone, memory refused, a service lost: 6, 7, 8, 9
    if machine is not None:
        return machine
    if isinstance(exc, FleetError) and exc.code != BUG:
        return exc.code, str(exc)
    fault = as_fault(exc)  # a path or file the user must fix, not a bug
    if fault is not None:
        logging.getLogger("fleet").debug("the environment stopped %s", command, exc_info=exc)  # -v: where
        return USAGE, str(fault)
    return None


def bug(exc: BaseException, command: str) -> str:
    text = " ".join(str(exc).split())
    text = text if len(text) <= 300 else text[:299] + "…"
    return (f"{command} stopped on an unexpected {type(exc).__name__}: {text or 'no message'} "
            "(this is a bug, not your input's fault; run again with -v to see the traceback)")


def machine_fault(exc: BaseException) -> tuple[int, str] | None:
    """A fault of the machine, not a bug: (exit code, one line) for a full disk, a store or lock gone, an
    allocation refused, or a service the run depends on lost; else None."""
    from fleet_data.tasks.control import memory
    from fleet_data.tasks.control.resources import ResourceLost, full_disk_error

    if isinstance(exc, ResourceLost):
        return exc.code, exc.reason
    if (allocation := memory.refused(exc)) is not None:  # an OutOfMemory, or an allocation refused anywhere
        return NO_MEMORY, memory.out_of_memory_line(allocation)
    refused = full_disk_error(exc)
    if refused is None:
        return None
    text = " ".join(str(refused).split())
    return NO_SPACE, f"disk full: {text[:240]}; free some space and run again: nothing paid is bought twice"
