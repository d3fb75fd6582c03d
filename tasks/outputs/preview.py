"""A refresh's plan made without writing anything: what `--dry-run` answers. A refresh that holds the lock
plans from its working store instead and tells its plan the same way (`preview_of`) before Prefect starts.

The fleet is read as the ingest reads it, and the roster lands, through the usual landing, in a DuckDB
database in memory that has our schema and in which every other table is a view of the published
database (`--db`) attached read-only. There the refresh's own functions settle the plate rows and make
the plan (`settle_at_ingest`, `make_plan`), their staged lists going to a temporary folder. A database
that does not exist yet reads as an empty one: everything is due. Nothing beside `--db` is opened for
writing: no working store, lock, progress file or staging folder. Neither Prefect nor the service is
needed, so a dry run answers in about the time it takes to read the file.

The published snapshot may be a little behind the working store (a long run publishes every few
minutes): a run follows the plan it makes once it holds the lock, from the working store.
`fleet refresh` makes that plan first (tasks/steps/refresh_steps.py `plan_ahead`): it costs no in-memory
schema and no second plan, and it is the one the run follows.
"""

from __future__ import annotations

import tempfile
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet_data.tasks.ingest.fleet_files import IngestResult
from fleet_data.tasks.plan.due import DueRule, Plan, make_plan, parse_freshness
from fleet_data.tasks.ingest.plates import settle_at_ingest
from fleet_data.tasks.settings import service_in_use
from fleet_data.tasks.store.published import read_only_view
from fleet_data.tasks.outputs.summary import plan_text
from fleet_data.tasks.run.summary import RunSummary



@dataclass
class Preview:
    summary: dict[str, Any]  # as a run's summary leaves it (its JSON form): `planned`, or `refused` over --max-units
    plan: str  # the plan as the user reads it (`plan_text`)
    nothing_due: bool = False  # no dataset has a VIN due and no plate needs a lookup


def preview_refresh(
    fleet: IngestResult,
    db_path: str | Path,
    run_id: str,
    datasets: list[str],
    *,
    force: bool = False,
    freshness: dict[str, str] | None = None,
    plates: bool = True,
    max_units: int | None = None,
) -> Preview:
    """The plan of refreshing `fleet` (read by `read_fleet`) into `db_path`, computed without writing, for the
    service the command would call (`service_in_use`)."""
    service = service_in_use()
    with read_only_view(db_path) as view, tempfile.TemporaryDirectory(prefix="fleet-plan-") as folder:
        roster, counts = fleet.roster, fleet.summary()
        waiting = Path(folder) / "plates_waiting.parquet"
        if fleet.plates.height:  # settled as the ingest settles them; the rest would be looked up
            roster, _, counts = settle_at_ingest(view, fleet, enabled=plates, waiting_path=waiting, service=service)
        # Planned from the roster as read, not landed: landing a million-row roster costs more time and
        # memory than the rest of the dry run (make_plan gives the same plan either way: tests/tasks/test_plan.py).
        plan: Plan = make_plan(view, run_id, datasets, Path(folder) / "due",
                               rule=DueRule(force, parse_freshness(freshness), service=service), plates_waiting=waiting,
                               roster=roster)
    return preview_of(plan, counts, max_units)


def preview_of(plan: Plan, counts: dict[str, int], max_units: int | None) -> Preview:
    """What a refresh's `plan` (made for the fleet whose ingest `counts` it is) tells before anything is called."""
    return Preview(_planned(RunSummary.start(plan.run_id, counts, plan), plan, max_units), plan_text(plan),
                   plan.nothing_due)


def preview_backfill(db_path: str | Path, run_id: str, datasets: list[str] | None, *, vins: list[str] | None = None,
                     failures_of: str | None = None, all_failures: bool = False,
                     max_units: int | None = None) -> Preview:
    """A backfill's plan, priced without writing or calling (`fleet backfill --dry-run`): the VINs given (each on
    the published roster, or valid) or the open failures, read from the published database read-only."""
    from fleet_data.tasks.plan.backfill import chosen_datasets, check_vins, due_frames, plan_from_frames, vin_counts
    from fleet_data.tasks.plan.due import ALL_DATASETS, DEFAULT_DATASETS
    from fleet_data.tasks.store.published import open_published

    by_failures = vins is None
    chosen = list(datasets or (ALL_DATASETS if by_failures else DEFAULT_DATASETS))
    reading: AbstractContextManager[Any] = (open_published(db_path) if Path(db_path).is_file()
                                            else read_only_view(db_path))  # none yet: an empty one
    with reading as db:
        if vins is not None:
            vins, refused = check_vins(db, vins)
            if refused:
                raise ValueError("not on the roster and not valid VINs: "
                                 + ", ".join(f"{raw} ({reason})" for raw, reason in refused))
        if failures_of and not db.query("run_started_at", run_id=failures_of).height:
            raise ValueError(f"no run {failures_of!r} in {db_path}")
        frames = due_frames(db, chosen, vins, failures_of, all_failures)
    plan = chosen_datasets(datasets, by_failures, plan_from_frames(run_id, frames, chosen, None))
    summary = RunSummary.start(run_id, vin_counts(plan), plan, kind="backfill")
    return Preview(_planned(summary, plan, max_units), plan_text(plan), not any(d.due for d in plan.datasets.values()))


def _planned(summary: RunSummary, plan: Plan, max_units: int | None) -> dict[str, Any]:
    """A dry run's summary: `planned`, or refused as the run would be (`Plan.refusal`)."""
    summary.status = "planned"
    if refused := plan.refusal(max_units):
        summary.refuse(refused)
    return summary.as_json()
