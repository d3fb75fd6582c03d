"""A run's figures while it runs: typed, each with one owner.

The flow owns the `RunSummary` and its `RunBudget`, and adds to them what its tasks return: a `ChunkOutcome` per
fetch task, a recall batch's, the plate lookups' and the recall details' outcomes. Nothing else changes them.
`RunSummary.as_json()` is the summary as it leaves the run: what `--json` prints, the Prefect artifact and the
printed table read (tasks/outputs/summary.py), in the same words and shape as before it was typed.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleet_data.tasks.plan.due import Plan
    from fleet_data.tasks.recalls.batches import RecallOutcome
    from fleet_data.tasks.recalls.details import DetailsOutcome


class Schedule(enum.Enum):
    """How a run's tasks take turns, decided once from `--max-units`.

    Without a budget, side by side: the recall batches are worked on by the service while every per-VIN
    dataset's chunks fetch at once (flows/refresh.py `fetch_side_by_side`). With one, one task at a time, so the
    budget each task is given is exactly what the ones before it left."""

    SIDE_BY_SIDE = "side by side"
    ONE_AT_A_TIME = "one task at a time"

    @classmethod
    def of(cls, max_units: int | None) -> Schedule:
        return cls.SIDE_BY_SIDE if max_units is None else cls.ONE_AT_A_TIME


@dataclass
class RunBudget:
    """What `--max-units` leaves the run to spend; `left` is None without a budget. The flow spends from it as
    each task's outcome comes back, and gives the next task what is left (within a task, tasks/control/budget.py
    reserves each call's units from that)."""

    left: int | None

    def spend(self, units: int) -> None:
        if self.left is not None:
            self.left = max(0, self.left - units)


@dataclass
class ChunkOutcome:
    """What one task did for its chunk of VINs of one dataset."""

    found: int = 0
    no_data: int = 0
    failed: int = 0
    pending: int = 0
    calls: int = 0
    units: int = 0
    possible_units: int = 0  # what calls never answered may have cost besides `units` (api_calls.billing 'unknown')
    stop_reason: str | None = None

    @property
    def settled(self) -> int:
        """VINs this chunk answered, failed or left pending: how far its progress bar moved."""
        return self.found + self.no_data + self.failed + self.pending


@dataclass
class PlateOutcome:
    """The plate lookups' outcome (tasks/land/plates.py): the rows they settled and the calls they made."""

    valid: int = 0  # rows whose plate found a VIN new to the roster
    duplicates: int = 0
    rejected: int = 0
    rows: int = 0
    lookups: int = 0
    found: int = 0
    not_found: int = 0
    failed: int = 0
    not_looked_up: int = 0
    calls: int = 0
    units: int = 0
    stop_reason: str | None = None


# A dataset's figures that only a plan gives (a re-parse has none): left out of its JSON when there is no plan.
_PLANNED_ONLY = frozenset({"not_applicable", "other_service", "future_dated", "answered_before"})


@dataclass
class DatasetFigures:
    """One row of the summary's table: the plan's counts, then what the run's tasks did."""

    roster: int = 0
    not_applicable: int | None = None  # roster VINs the dataset does not apply to (tasks/ingest/markets.py)
    skipped_fresh: int = 0
    planned: int = 0
    estimated_units: int = 0
    other_service: int | None = None  # due although fresh: another service answered them (tasks/plan/due.py)
    future_dated: int | None = None  # due although fresh: dated ahead of this clock
    found: int = 0
    no_data: int = 0
    failed: int = 0
    pending: int = 0
    calls: int = 0
    units: int = 0
    possible_units: int = 0
    stop_reason: str | None = None  # why the dataset stopped before its last VIN; the first reason stays
    answered_before: int | None = None  # of `planned`, VINs with an earlier answer (nothing to compare otherwise)

    def add(self, outcome: ChunkOutcome) -> None:
        for name in ("found", "no_data", "failed", "pending", "calls", "units", "possible_units"):
            setattr(self, name, getattr(self, name) + getattr(outcome, name))
        self.stop_reason = self.stop_reason or outcome.stop_reason

    def leave_pending(self, vins: int, reason: str) -> None:
        """VINs not fetched (or not waited for): not failed, due again next run."""
        self.pending += vins
        self.stop_reason = self.stop_reason or reason

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None or k not in _PLANNED_ONLY}


@dataclass
class PlateFigures:
    """The rows with a plate instead of a VIN, and what their lookups found."""

    rows: int
    known: int  # found by an earlier run's lookup
    waiting: int  # rows to look up (the rest: known or rejected)
    lookups: int
    estimated_units: int
    found: int = 0
    not_found: int = 0
    failed: int = 0
    not_looked_up: int = 0
    calls: int = 0
    units: int = 0
    stop_reason: str | None = None


@dataclass
class PlannedFigures:
    """The plan as printed before any call (`plan_text`); the summary's estimate grows once plates find vehicles."""

    estimated_units: int
    recall_detail_ceiling: int
    plate_vehicle_ceiling: int


@dataclass
class MileageUnitUnknown:
    """Valuations asked without a mileage, whose unit the fleet file does not say (tasks/datasets.py)."""

    dataset: str
    vehicles: int
    vins: list[str]


@dataclass
class RunSummary:
    """The run's figures from its plan to its end; `as_json()` is what leaves the run."""

    run_id: str
    kind: str = "refresh"
    status: str = "running"
    service: str | None = None  # where its answers come from (connectors/config.py `service_name`); never the key
    ingest: dict[str, int] = field(default_factory=dict)  # rows in, VINs, duplicates, rejected (tasks/ingest)
    estimated_units: int = 0
    recall_detail_ceiling: int | None = None
    planned: PlannedFigures | None = None
    units: int = 0
    possible_units: int = 0  # what calls never answered may have cost besides `units`
    calls: int = 0
    datasets: dict[str, DatasetFigures] = field(default_factory=dict)
    mileage_unit_unknown: MileageUnitUnknown | None = None
    plate_vehicle_ceiling: int | None = None
    plates: PlateFigures | None = None
    plate_vehicle_units: int | None = None  # what the vehicles plates found added to the printed estimate
    recall_details: DetailsOutcome | None = None
    fetched_in: list[int] | None = None  # the worker processes that fetched (--workers, --dask)
    message: str | None = None  # runs.message: why it ended as it did, in one line
    failure: str | None = None  # halted: the resource lost (tasks/control/resources.py), for the exit code
    quarantined_journals: int | None = None
    quarantine_folder: str | None = None

    @classmethod
    def start(cls, run_id: str, ingest: dict[str, int], plan: Plan, kind: str = "refresh") -> RunSummary:
        summary = cls(run_id, kind, service=plan.service, ingest=dict(ingest))
        summary._take_plan(plan)
        summary.planned = PlannedFigures(plan.estimated_units, plan.recall_detail_ceiling, plan.plate_vehicle_ceiling)
        if ingest.get("plate_rows"):
            summary.plate_vehicle_ceiling = plan.plate_vehicle_ceiling
            summary.plates = PlateFigures(
                rows=ingest["plate_rows"], known=ingest.get("plates_known", 0), waiting=ingest.get("plates_waiting", 0),
                lookups=plan.plates.lookups if plan.plates else 0,
                estimated_units=plan.plates.estimated_units if plan.plates else 0)
        return summary

    def _take_plan(self, plan: Plan) -> None:
        self.estimated_units = plan.estimated_units
        self.recall_detail_ceiling = plan.recall_detail_ceiling
        self.service = plan.service
        self.datasets = {
            name: DatasetFigures(roster=d.roster, not_applicable=d.not_applicable, skipped_fresh=d.skipped_fresh,
                                 planned=d.due, estimated_units=d.estimated_units, other_service=d.other_service_due,
                                 future_dated=d.future_due, answered_before=d.answered_before)
            for name, d in plan.datasets.items()}
        self.mileage_unit_unknown = None
        for d in plan.datasets.values():
            if d.unit_unknown:  # asked without a mileage: its unit cannot be known (tasks/datasets.py valuation_request)
                self.mileage_unit_unknown = MileageUnitUnknown(d.dataset, d.unit_unknown, d.unit_unknown_vins)

    # --- what the flow adds as its tasks come back -----------------------------------------------------

    def add_chunk(self, dataset: str, outcome: ChunkOutcome, budget: RunBudget | None = None) -> None:
        self.datasets[dataset].add(outcome)
        if budget is not None:
            budget.spend(outcome.units)

    def leave_pending(self, dataset: str, vins: int, reason: str) -> None:
        self.datasets[dataset].leave_pending(vins, reason)

    def add_recall_batches(self, outcome: RecallOutcome, budget: RunBudget) -> None:
        """The recall batches' outcome, in the recalls row: a VIN checked counts as found."""
        self.add_chunk("recalls", ChunkOutcome(found=outcome.checked, failed=outcome.failed, pending=outcome.pending,
                                               calls=outcome.calls, units=outcome.units,
                                               stop_reason=outcome.stop_reason), budget)

    def add_recall_details(self, outcome: DetailsOutcome) -> None:
        self.recall_details = outcome
        self.calls += outcome.calls
        self.units += outcome.units
        self.possible_units += outcome.possible_units

    def add_plates(self, outcome: PlateOutcome, budget: RunBudget | None = None) -> None:
        """The plate lookups' outcome: rows waiting for them now count as valid, duplicates or rejected."""
        assert self.plates is not None, "plates looked up for a run whose fleet had no plate rows"
        for name in ("found", "not_found", "failed", "not_looked_up", "calls", "units"):
            setattr(self.plates, name, getattr(self.plates, name) + getattr(outcome, name))
        self.plates.stop_reason = self.plates.stop_reason or outcome.stop_reason
        for name in ("valid", "duplicates", "rejected"):
            self.ingest[name] = self.ingest.get(name, 0) + getattr(outcome, name)
        self.ingest["plates_waiting"] = 0
        self.calls += outcome.calls
        self.units += outcome.units
        self.plate_vehicle_units = 0  # until `replan` prices the vehicles they found
        if budget is not None:
            budget.spend(outcome.units)

    def replan(self, plan: Plan) -> None:
        """The plan made again once plates found their VINs: the datasets' figures now include those vehicles.

        `planned` keeps the plan as printed; `plate_vehicle_units` is what the found vehicles added to it, so the
        summary's estimate is the printed one plus that (`estimate_text`)."""
        assert self.planned is not None
        self._take_plan(plan)
        self.estimated_units = plan.estimated_units + (self.plates.estimated_units if self.plates else 0)
        self.plate_vehicle_units = self.estimated_units - self.planned.estimated_units
        self.plate_vehicle_ceiling = 0

    def printed_plan(self) -> dict[str, int]:
        """The run's first plan, as `plan_text` printed it, for the plan made again once plates found vehicles."""
        assert self.planned is not None
        return {**asdict(self.planned), "plates_units": self.plates.estimated_units if self.plates else 0}

    # --- how it ends -------------------------------------------------------------------------------------

    def refuse(self, why: str) -> None:
        """Refused before any call (over `--max-units`): nothing was called."""
        self.status, self.message = "refused", why

    def halt(self, why: str, failure: str) -> None:
        """Halted: a full disk, its store or lock gone, a service lost (tasks/control/resources.py)."""
        self.status, self.message, self.failure = "failed", why, failure

    def end(self, cancelled: bool = False) -> None:
        """Total the datasets and say whether anything was left failed or pending, or the run was cancelled
        (a stop signal: tasks/control/signals.py); a cancelled run's status says so whatever it had finished."""
        for counts in self.datasets.values():
            self.calls += counts.calls
            self.units += counts.units
            self.possible_units += counts.possible_units
        parts = self._unsettled()
        plates = self.plates
        unfinished = any(failed or pending for failed, pending in parts)
        unfinished = unfinished or bool(plates and (plates.failed or plates.not_looked_up))
        self.status = "cancelled" if cancelled else "partial" if unfinished else "completed"
        if self.status == "partial" and not self.message:  # runs.message says why, as for the others
            self.message = self.partial_message()
        if cancelled:
            left = sum(pending for _, pending in parts)
            self.message = (f"cancelled by a stop signal: no call started after it; answers not landed yet land in the "
                            f"next run; {left} VIN-datasets left pending for the next run")

    def _unsettled(self) -> list[tuple[int, int]]:
        """(failed, pending) of every dataset and of the recall details."""
        parts = [(d.failed, d.pending) for d in self.datasets.values()]
        details = self.recall_details
        return parts + ([(details.failed, details.pending)] if details else [])

    def partial_message(self) -> str:
        """Why a run ended partial, in one line: what it left pending and what failed (the view vin_status lists them)."""
        parts = self._unsettled()
        failed, pending = sum(f for f, _ in parts), sum(p for _, p in parts)
        plates = self.plates
        words = [f"{pending} VIN-datasets left pending" if pending else "", f"{failed} failed" if failed else "",
                 f"{plates.not_looked_up} plates not looked up" if plates and plates.not_looked_up else "",
                 f"{plates.failed} plate lookups failed" if plates and plates.failed else ""]
        return (", ".join(w for w in words if w) + ": the next refresh asks again for what is pending and the failures "
                "worth retrying (view vin_status)")

    def as_json(self) -> dict[str, Any]:
        """The summary as it leaves the run: unset optional parts left out, as they always were."""
        always = ("run_id", "kind", "status", "ingest", "estimated_units", "units", "possible_units", "calls", "datasets")
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name not in always:
                continue
            if f.name == "datasets":
                value = {name: d.as_json() for name, d in value.items()}
            elif f.name == "ingest":
                value = dict(value)
            elif hasattr(value, "__dataclass_fields__"):
                value = asdict(value)
            out[f.name] = value
        return out

