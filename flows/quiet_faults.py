"""Prefect's terminal lines for an environment fault held back in `fleet`'s processes (tasks/control/quiet.py)."""

from __future__ import annotations

import os

from fleet_data.tasks.control.quiet import HIDE, install


def hide_fault_tracebacks(verbose: bool) -> None:
    """Install the filter here, and say so to the processes this one starts (`--workers`); `-v` shows every traceback."""
    if verbose:
        return
    os.environ[HIDE] = "1"
    install()
