"""The refresh plan: which VINs are due per dataset, and what calling for them will cost.

A dataset applies to the vehicles of the markets its declaration names (tasks/markets.py); the
others are `not_applicable` and never called. An applicable VIN is due when its last successful
answer (`fetch_status`) is older than the dataset's freshness window, or when it never answered;
`force` makes every applicable VIN due. Due VIN lists are staged as Parquet so chunk tasks take a
path and a slice, not a list.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl

from connectors import estimate_units

from .enrich import DATASETS as ENRICHMENT
from .enrich import Dataset
from .markets import in_scope, with_market
from .plates import PlatePlan, plan_plates
from .storage import Database

ALL_DATASETS = ("specs", "market_value", "history", "lien_theft", "recalls", "ownership")
DEFAULT_DATASETS = ("specs", "market_value", "history", "lien_theft", "recalls")

# How long an answer stays fresh. Specs do not change; values move monthly; recalls weekly.
DEFAULT_FRESHNESS = {
    "specs": timedelta(days=365),
    "market_value": timedelta(days=30),
    "history": timedelta(days=90),
    "lien_theft": timedelta(days=30),
    "recalls": timedelta(days=7),
    "ownership": timedelta(days=90),
}


@dataclass
class DatasetPlan:
    dataset: str
    endpoint: str
    roster: int
    due: int
    skipped_fresh: int
    estimated_units: int
    path: str | None  # staged due VINs (Parquet), None when nothing is due
    not_applicable: int = 0  # roster VINs outside the dataset's markets: roster = not_applicable + skipped_fresh + due

    def chunks(self, size: int) -> list[tuple[int, int]]:
        return [(start, min(size, self.due - start)) for start in range(0, self.due, size)]


@dataclass
class Plan:
    run_id: str
    datasets: dict[str, DatasetPlan] = field(default_factory=dict)
    plates: PlatePlan | None = None  # plate lookups for rows without a VIN, priced before any is made

    @property
    def estimated_units(self) -> int:
        return sum(d.estimated_units for d in self.datasets.values()) + (self.plates.estimated_units if self.plates else 0)

    @property
    def plate_vehicle_ceiling(self) -> int:
        """The datasets of the vehicles plates may find are priced once found: at most one call each per plate."""
        if not self.plates:
            return 0
        per_vin = sum(1 if d.dataset == "recalls" else estimate_units(d.endpoint) for d in self.datasets.values())
        return self.plates.lookups * per_vin

    @property
    def recall_detail_ceiling(self) -> int:
        """Campaign details are priced after the batch says which VINs have recalls: at most one per VIN."""
        recalls = self.datasets.get("recalls")
        return recalls.due if recalls else 0

    def to_dict(self) -> dict:
        return {"run_id": self.run_id, "datasets": {k: asdict(v) for k, v in self.datasets.items()},
                "plates": asdict(self.plates) if self.plates else None}

    @classmethod
    def from_dict(cls, data: dict) -> "Plan":
        plates = PlatePlan(**data["plates"]) if data.get("plates") else None
        return cls(data["run_id"], {k: DatasetPlan(**v) for k, v in data["datasets"].items()}, plates)


def declaration(dataset: str) -> Dataset:
    """The declaration a plan dataset is fetched by: recalls are batch-checked, then detailed per VIN."""
    return ENRICHMENT["recall_details" if dataset == "recalls" else dataset]


def applicability_table() -> str:
    """Which datasets apply to which vehicles, as the README shows it (derived from the declarations)."""
    lines = ["| dataset | applies to vehicles registered in |", "|---|---|"]
    for name in ALL_DATASETS:
        markets = declaration(name).markets
        where = "anywhere" if markets is None else ", ".join(sorted(markets))
        lines.append(f"| {name} | {where} |")
    return "\n".join(lines)


def parse_freshness(overrides: dict[str, str] | None) -> dict[str, timedelta]:
    """`{"market_value": "14d", "recalls": "12h"}` -> windows; unknown datasets are refused."""
    windows = dict(DEFAULT_FRESHNESS)
    for name, text in (overrides or {}).items():
        if name not in windows:
            raise ValueError(f"unknown dataset {name!r} in freshness; choose from {', '.join(ALL_DATASETS)}")
        number, unit = text[:-1], text[-1:].lower()
        if unit not in ("d", "h", "m") or not number.replace(".", "", 1).isdigit():
            raise ValueError(f"freshness {text!r} for {name}: use a number with d, h or m (e.g. 30d)")
        windows[name] = timedelta(**{{"d": "days", "h": "hours", "m": "minutes"}[unit]: float(number)})
    return windows


def make_plan(
    db: Database,
    run_id: str,
    datasets: tuple[str, ...] | list[str],
    staging_dir: Path,
    *,
    force: bool = False,
    freshness: dict[str, timedelta] | None = None,
    now: datetime | None = None,
    plates_waiting: Path | None = None,
) -> Plan:
    unknown = [d for d in datasets if d not in ALL_DATASETS]
    if unknown:
        raise ValueError(f"unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(ALL_DATASETS)}")
    windows = freshness or DEFAULT_FRESHNESS
    now = now or datetime.now(timezone.utc)
    vehicles = with_market(db.query("roster_markets", run_id=run_id))
    roster = vehicles.height
    plan = Plan(run_id, plates=plan_plates(str(plates_waiting)) if plates_waiting and plates_waiting.exists() else None)
    staging_dir.mkdir(parents=True, exist_ok=True)
    for dataset in datasets:
        scope = in_scope(vehicles, declaration(dataset).markets)
        due = db.query("due_vins", run_id=run_id, dataset=dataset, force=force, fresh_after=now - windows[dataset])
        if scope.height < roster:
            due = due.filter(pl.col("vin").is_in(scope["vin"].implode()))
        path = None
        if due.height:
            path = str(staging_dir / f"due_{dataset}.parquet")
            due.write_parquet(path)
        endpoint = "recalls-batch-submit" if dataset == "recalls" else ENRICHMENT[dataset].endpoint
        units = due.height if dataset == "recalls" else due.height * estimate_units(endpoint)
        plan.datasets[dataset] = DatasetPlan(dataset, endpoint, roster, due.height, scope.height - due.height, units,
                                             path, not_applicable=roster - scope.height)
    return plan


def read_slice(path: str, offset: int = 0, length: int | None = None) -> list[dict]:
    """The rows of one chunk of a staged due list (all of it without a length)."""
    return pl.scan_parquet(path).slice(offset, length).collect().to_dicts()


def read_vins(path: str) -> list[str]:
    """Only the VINs of a staged due list: a million-VIN recall check needs no dict per row."""
    return pl.read_parquet(path, columns=["vin"])["vin"].to_list()
