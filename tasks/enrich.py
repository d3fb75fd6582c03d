"""Per-VIN enrichment of one chunk: bounded async concurrency, quota/credit stops, a budget.

Plain async code (no Prefect): the flow wraps `fetch_chunk` in a chunk-sized task.
Every VIN handed in comes back in exactly one list: found, no_data, failed or pending.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Sequence

from connectors import AsyncVehicleDataClient, CallRecord, Settings, estimate_units
from connectors import errors as e

if TYPE_CHECKING:
    from .journal import AnswerJournal

Call = Callable[[AsyncVehicleDataClient, str, Mapping[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class Dataset:
    name: str  # the user's word, as in `--datasets` and the `failures.dataset` column
    endpoint: str  # the endpoint's name in connectors.ENDPOINTS
    call: Call
    request: Callable[[Mapping[str, Any]], dict[str, Any]] = lambda row: {}


def _valuation_request(row: Mapping[str, Any]) -> dict[str, Any]:
    """What is asked of the valuation: the roster's state and mileage; a condition only with mileage."""
    mileage = row.get("mileage")
    condition = row.get("condition") or ("clean" if mileage is not None else None)
    return {"state": row.get("state") or None, "mileage": mileage, "condition": condition}


DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset("specs", "specs", lambda c, vin, row: c.specs(vin)),
        Dataset(
            "market_value", "market-value",
            lambda c, vin, row: c.market_value(vin, **_valuation_request(row)),
            _valuation_request,
        ),
        Dataset("history", "history", lambda c, vin, row: c.history(vin)),
        Dataset("lien_theft", "lien-theft", lambda c, vin, row: c.lien_theft(vin)),
        Dataset("ownership", "ownership", lambda c, vin, row: c.ownership(vin)),
        Dataset("recall_details", "recalls", lambda c, vin, row: c.recalls(vin)),
    )
}

# Errors after which no further call to the same endpoint can succeed this run.
STOPPING_ERRORS = (e.QuotaExceededError, e.InsufficientCreditsError, e.PermissionDeniedError, e.AuthenticationError)


class Budget:
    """A run-wide ceiling on units (`--max-units`), shared by every chunk in the process."""

    def __init__(self, limit: int | None, spent: int = 0) -> None:
        self.limit = limit
        self.spent = spent
        self.reserved = 0

    def reserve(self, units: int) -> bool:
        if self.limit is not None and self.spent + self.reserved + units > self.limit:
            return False
        self.reserved += units
        return True

    def settle(self, reserved: int, actual: int) -> None:
        self.reserved -= reserved
        self.spent += actual


@dataclass
class ChunkResult:
    dataset: str
    found: list[tuple[str, Any, datetime]] = field(default_factory=list)
    no_data: list[tuple[str, datetime]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    calls: list[tuple[str, CallRecord, datetime, str | None]] = field(default_factory=list)
    requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    stop_reason: str | None = None

    @property
    def units(self) -> int:
        return sum(c.units for _, c, _, _ in self.calls)


async def fetch_chunk(
    dataset: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    settings: Settings,
    concurrency: int = 32,
    budget: Budget | None = None,
    on_progress: Callable[[int], None] | None = None,
    journal: AnswerJournal | None = None,
) -> ChunkResult:
    """Fetch `dataset` for every row (each has at least `vin`). Stops the endpoint on quota/credits.

    With a `journal`, every attempt and every VIN's final answer is written to it as it arrives.
    """
    spec = DATASETS[dataset]
    result = ChunkResult(dataset)
    budget = budget or Budget(None)
    per_call = estimate_units(spec.endpoint, spec.request(rows[0]) if rows else {})

    units_by_vin: dict[str, int] = {}
    attempts_by_vin: dict[str, int] = {}
    settling: dict[str, tuple] = {}  # VIN -> its last call, journalled with the answer it settles

    def observe(record: CallRecord) -> None:
        call = (uuid.uuid4().hex, record, _now(), None)
        result.calls.append(call)
        if record.vin:
            units_by_vin[record.vin] = units_by_vin.get(record.vin, 0) + record.units
            attempts_by_vin[record.vin] = attempts_by_vin.get(record.vin, 0) + 1
        if journal is not None:
            if record.will_retry or not record.vin:
                journal.attempt(call)
            else:
                settling[record.vin] = call

    def settled(vin: str, outcome: str, at: datetime, **answer: Any) -> None:
        if journal is not None:
            journal.answer(settling.pop(vin, None), vin, outcome, at, **answer)

    queue: asyncio.Queue[Mapping[str, Any]] = asyncio.Queue()
    for row in rows:
        queue.put_nowait(row)

    async with AsyncVehicleDataClient(settings, on_call=observe) as client:

        async def worker() -> None:
            while not queue.empty():
                row = queue.get_nowait()
                vin = row["vin"]
                if result.stop_reason or not budget.reserve(per_call):
                    result.stop_reason = result.stop_reason or "max-units reached"
                    result.pending.append(vin)
                    continue
                try:
                    answer = await spec.call(client, vin, row)
                    at = _now()
                    result.found.append((vin, answer, at))
                    result.requests[vin] = asked = spec.request(row)
                    settled(vin, "found", at, body=answer.raw, request=asked)
                except e.NotFoundError as exc:
                    if isinstance(exc, (e.FeatureNotEnabledError, e.InvalidRegionError)):
                        result.failed.append(failure := _failure(vin, dataset, exc, attempts_by_vin.get(vin, 1)))
                        settled(vin, "failed", failure["fetched_at"], message=exc.message, retryable=exc.retryable)
                    else:
                        result.no_data.append((vin, at := _now()))  # a stable answer: the VIN is checked
                        settled(vin, "no_data", at)
                except STOPPING_ERRORS as exc:
                    result.stop_reason = result.stop_reason or f"{exc.status} {exc.message}"
                    result.pending.append(vin)
                    settled(vin, "pending", _now(), message=f"{exc.status} {exc.message}")
                except e.VehicleDataError as exc:
                    result.failed.append(failure := _failure(vin, dataset, exc, attempts_by_vin.get(vin, 1)))
                    settled(vin, "failed", failure["fetched_at"], message=exc.message, retryable=exc.retryable)
                finally:
                    if vin in settling:  # no answer settled it (an unexpected error): still a call paid for
                        journal.attempt(settling.pop(vin))  # type: ignore[union-attr]
                    budget.settle(per_call, units_by_vin.get(vin, 0))
                    if on_progress:
                        on_progress(1)

        await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(rows))))))
    return result


def _failure(vin: str, dataset: str, exc: e.VehicleDataError, attempts: int) -> dict[str, Any]:
    return {
        "vin": vin,
        "dataset": dataset,
        "status": getattr(exc, "status", None),
        "message": exc.message,
        "retryable": exc.retryable,
        "attempts": attempts,
        "fetched_at": _now(),
    }


def _now() -> datetime:
    return datetime.now(timezone.utc)
