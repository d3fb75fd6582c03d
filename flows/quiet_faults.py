"""Prefect's terminal lines for an environment fault held back in `fleet`'s processes (tasks/control/quiet.py)."""

from __future__ import annotations

from fleet_data.tasks.control.quiet import install


def hide_fault_tracebacks(verbose: bool) -> None:
    """Install the filter here (the flow tells the processes it starts, `--workers`); `-v` shows every traceback."""
    if not verbose:
        install()
