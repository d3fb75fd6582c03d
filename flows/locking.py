"""How a command that writes the database takes its run lock, or says in one line why it cannot.

Called before the sandbox or Prefect start (neither is imported here), so a refused run costs
nothing: exit code 75 (EX_TEMPFAIL, "try again later"), or `--wait` to queue behind the holder.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fleet_data.tasks.run.context import RunSession


def hold_or_refuse(db: str, run_id: str, command: str, wait: bool) -> "RunSession | int":
    """The held session; a CommandError (exit code 75 when another run holds `db`) when it cannot be taken."""
    from fleet_data.tasks.run.lock import EX_TEMPFAIL, RunLocked
    from fleet_data.tasks.run.context import hold_run
    from fleet_data.tasks.store.database import DatabaseBusy, DatabaseError

    from .checks import CommandError

    try:
        return hold_run(db, run_id, command, wait=wait)
    except RunLocked as exc:
        raise CommandError(str(exc), EX_TEMPFAIL) from None  # printed by flows.cli, as text or JSON
    except DatabaseBusy as exc:
        # Our lock was free but DuckDB's is not: a run whose lock file was deleted still holds the store.
        raise CommandError(f"{db} is in use by another run (it holds the working store; its lock file was "
                           f"deleted or replaced?); wait for it to finish, or run again later ({exc})", EX_TEMPFAIL) from None
    except DatabaseError as exc:
        raise CommandError(str(exc)) from None


def add_wait_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait", action="store_true",
                        help="if another run holds the database, queue behind it instead of exiting with code 75")
