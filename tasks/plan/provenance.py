"""What a database holds that decides whether a run may start: which services its answers came from, and when
its last run was. Read from the published file, read-only, before anything starts (flows/checks.py refuses on
it, exit code 2), and from the working store under the lock before a run is recorded (`refusal`).

- The embedded sandbox's answers are made up: it never lands in a database holding another service's answers,
  nor answers landed before services were recorded (NULL: they may be the real service's).
- A clock behind the database's last run (in run order) by more than `CLOCK_TOLERANCE` would date new answers
  before those they replace and measure freshness from the wrong day: refused, unless the user says the clock
  is right (`--allow-clock-behind`: that run's clock was ahead).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from fleet_data.tasks.errors import UsageError
from fleet_data.connectors.config import EMBEDDED_SANDBOX
from fleet_data.tasks.settings import CLOCK_TOLERANCE, flag_name

SERVICES_RECORDED = 12  # the migration that added `service` to runs and answers
RUNS_NUMBERED = 13  # the one that added `run_seq`


class Source(Protocol):
    def query(self, name: str, **params: Any) -> pl.DataFrame: ...


@dataclass(frozen=True)
class Provenance:
    """The answers' services (None: unknown) with their rows, and the last run in run order."""

    services: dict[str | None, int] = field(default_factory=dict)
    last_run: dict[str, Any] | None = None


def read(source: Source, schema_version: int) -> Provenance:
    """`source`'s provenance; a file published before migrations 0012/0013 is read as they left it."""
    services = source.query("store_services" if schema_version >= SERVICES_RECORDED else "store_services_before_0012")
    last = source.query("store_last_run" if schema_version >= RUNS_NUMBERED else "store_last_run_before_0013")
    return Provenance({s: int(n) for s, n in services.iter_rows()}, last.row(0, named=True) if last.height else None)


def read_published(db: str | Path) -> Provenance:
    """The published file's provenance (an absent file holds nothing)."""
    from fleet_data.tasks.store.published import open_published

    if not Path(db).is_file():
        return Provenance()
    with open_published(db) as published:
        version = published.query("schema_version").item()
        return read(published, int(version or 0))


def sandbox_refusal(held: Provenance, service: str, db: str | Path) -> str | None:
    """Why the embedded sandbox may not land in `db` (None: it may): answers of another service, or unknown."""
    if service != EMBEDDED_SANDBOX:
        return None
    others = [s for s in held.services if s != EMBEDDED_SANDBOX]
    if not others:
        return None
    named = [s for s in others if s] + (["an unknown service (landed before services were recorded: maybe the real "
                                          "one)"] if None in others else [])
    return (f"{db} holds answers from {' and '.join(named)}: the embedded sandbox's made-up answers must never land "
            "among them. "
            "No VDS_API_KEY is set here (it is read from the environment, the .env beside fleet.toml and the .env "
            "in this folder): set it to call the real service, or give another --db to try the sandbox")


def clock_refusal(held: Provenance, db: str | Path, now: datetime | None = None) -> str | None:
    """Why a run may not start on this clock (None: it may): it is behind `db`'s last run by more than the tolerance."""
    last = held.last_run
    now = now or datetime.now(timezone.utc)
    if last is None or last["recorded_at"] is None or now >= last["recorded_at"] - CLOCK_TOLERANCE:
        return None
    behind = last["recorded_at"] - now
    return (f"this machine's clock ({now:%Y-%m-%d %H:%M} UTC) is {_span(behind)} behind the last run in {db} "
            f"({last['run_id']}, recorded {last['recorded_at']:%Y-%m-%d %H:%M} UTC): its answers would be dated before "
            "those they replace, and freshness measured from the wrong day. Set this clock right; if it is right "
            f"(that run's clock was ahead), run again with {flag_name('allow_clock_behind')}")


def refusal(held: Provenance, db: str | Path, service: str | None, allow_clock_behind: bool,
            now: datetime | None = None) -> str | None:
    """The one line a run that would call `service` (None: no call) is refused with, or None."""
    if service is not None:
        refused = sandbox_refusal(held, service, db)
        if refused:
            return refused
    return None if allow_clock_behind else clock_refusal(held, db, now)


class RunRefused(UsageError, ValueError):
    """The run may not start on this database (`refusal`'s line); nothing of it is recorded."""


def check_store(store: Any, db: str | Path, service: str | None, allow_clock_behind: bool) -> None:
    """`refusal`, from the run's working store under its lock, before the run is recorded (a served or deployed run
    has no command that checked the published file first); raises RunRefused."""
    refused = refusal(read(store, store.schema_version()), db, service, allow_clock_behind)
    if refused:
        raise RunRefused(refused)


def _span(delta: Any) -> str:
    days = delta.days
    if days >= 2:
        return f"{days} days"
    hours = delta.total_seconds() / 3600
    return f"{hours:.1f} hours" if hours >= 1 else f"{delta.total_seconds() / 60:.0f} minutes"
