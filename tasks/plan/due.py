"""The refresh plan: which VINs are due per dataset, and what calling for them will cost.

A dataset applies to the vehicles of the markets its declaration names (tasks/ingest/markets.py); the
others are `not_applicable` and never called. An applicable VIN is due when its last successful
answer (`fetch_status`) is older than the dataset's freshness window, or when it never answered;
`force` makes every applicable VIN due. A "no data" answer (a 404) has its own, shorter window
(`no_data`, 7 days): the service caches it for about a day and bills no 404. Due VIN lists are
staged as Parquet so chunk tasks take a path and a slice, not a list.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Sequence

import polars as pl

from fleet_data.connectors import estimate_units

from fleet_data.tasks.datasets import REGISTRY, Dataset, docs_table
# The registry's names and freshness windows, and the freshness grammar, live with the registry.
from fleet_data.tasks.datasets import (
    ALL_DATASETS as ALL_DATASETS,
    DEFAULT_DATASETS as DEFAULT_DATASETS,
    DEFAULT_FRESHNESS as DEFAULT_FRESHNESS,
    DEFAULT_NO_DATA_FRESHNESS as DEFAULT_NO_DATA_FRESHNESS,
    NO_DATA as NO_DATA,
    parse_freshness as parse_freshness,
)
from fleet_data.tasks.ingest.markets import in_scope, with_market
from fleet_data.tasks.ingest.plates import PlatePlan, plan_plates
from fleet_data.tasks.control import memory
from fleet_data.tasks.store.database import Database
from fleet_data.tasks.ingest.vins import vin_order



@dataclass
class DatasetPlan:
    dataset: str
    endpoint: str
    roster: int
    due: int
    skipped_fresh: int
    estimated_units: int
    path: str | None  # staged due VINs (Parquet), None when nothing is due
    no_data_due: int = 0  # of `due`: VINs whose last answer was "no data", asked again after its window
    not_applicable: int = 0  # roster VINs outside the dataset's markets: roster = not_applicable + skipped_fresh + due

    def chunks(self, size: int) -> list[tuple[int, int]]:
        return [(start, min(size, self.due - start)) for start in range(0, self.due, size)]


@dataclass
class Plan:
    run_id: str
    datasets: dict[str, DatasetPlan] = field(default_factory=dict)
    no_data_window: str | None = None  # e.g. "7d", shown with the plan
    plates: PlatePlan | None = None  # plate lookups for rows without a VIN, priced before any is made

    @property
    def estimated_units(self) -> int:
        return sum(d.estimated_units for d in self.datasets.values()) + (self.plates.estimated_units if self.plates else 0)

    @property
    def plate_vehicle_ceiling(self) -> int:
        """The datasets of the vehicles plates may find are priced once found: at most one call each per plate."""
        if not self.plates:
            return 0
        per_vin = sum(1 if declaration(d.dataset).batch_endpoint else estimate_units(d.endpoint)
                      for d in self.datasets.values())
        return self.plates.lookups * per_vin

    @property
    def recall_detail_ceiling(self) -> int:
        """Campaign details are priced after the batch says which VINs have recalls: at most one per VIN."""
        recalls = self.datasets.get("recalls")
        return recalls.due if recalls else 0

    def to_dict(self) -> dict:
        return {"run_id": self.run_id, "datasets": {k: asdict(v) for k, v in self.datasets.items()},
                "no_data_window": self.no_data_window, "plates": asdict(self.plates) if self.plates else None}

    @classmethod
    def from_dict(cls, data: dict) -> "Plan":
        plates = PlatePlan(**data["plates"]) if data.get("plates") else None
        return cls(data["run_id"], {k: DatasetPlan(**v) for k, v in data["datasets"].items()},
                   data.get("no_data_window"), plates)


def declaration(dataset: str) -> Dataset:
    """The declaration of a plan dataset (tasks/datasets.py)."""
    return REGISTRY[dataset]


def applicability_table() -> str:
    """Which datasets apply to which vehicles, as the README shows it: the registry's table."""
    return docs_table()


@dataclass(frozen=True)
class DueRule:
    """When a VIN is due: with `force`, always; else when its answer is older than its dataset's window in
    `freshness` (each dataset's declared window by default), as of `now` (the clock by default)."""

    force: bool = False
    freshness: dict[str, timedelta] | None = None
    now: datetime | None = None


def make_plan(
    db: Database,
    run_id: str,
    datasets: Sequence[str],
    staging_dir: Path,
    *,
    rule: DueRule | None = None,
    plates_waiting: Path | None = None,
    roster: pl.DataFrame | None = None,
) -> Plan:
    """Which of the run's roster VINs are due per dataset, their due lists staged in `staging_dir`.

    `roster`: the fleet's roster as read (`read_fleet`, plates settled), to plan from without landing it
    (a dry run: landing a million-row roster costs more than the rest of the plan); by default the
    roster landed under `run_id`. `rule`: what counts as due (tasks/plan/due.py `DueRule`); by default,
    an answer older than its dataset's freshness window, as of now.
    """
    rule = rule or DueRule()
    unknown = [d for d in datasets if d not in ALL_DATASETS]
    if unknown:
        raise ValueError(f"unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(ALL_DATASETS)}")
    # An allocation refused while planning: one line, exit code 8.
    with memory.guarded(memory.PLAN):
        return _make_plan(db, run_id, datasets, staging_dir, rule, plates_waiting, roster)


def _make_plan(db: Database, run_id: str, datasets: Sequence[str], staging_dir: Path, rule: DueRule,
               plates_waiting: Path | None, roster: pl.DataFrame | None) -> Plan:
    force, freshness, now = rule.force, rule.freshness, rule.now
    windows = {NO_DATA: DEFAULT_NO_DATA_FRESHNESS, **(freshness or DEFAULT_FRESHNESS)}
    now = now or datetime.now(timezone.utc)
    # One read of the roster and one of its last answers serve every dataset (a read per dataset cost
    # seconds on a million-VIN roster); the due rule is `due_vins.sql`'s, applied here per dataset.
    if roster is None:
        vehicles = with_market(db.query("plan_roster", run_id=run_id))
        statuses = db.query("plan_status", run_id=run_id, datasets=list(datasets))
    else:
        vehicles, statuses = _read_frame(db, roster, list(datasets))
    listed = vehicles.height
    plan = Plan(run_id, no_data_window=age_text(windows[NO_DATA]),
                plates=plan_plates(str(plates_waiting)) if plates_waiting and plates_waiting.exists() else None)
    staging_dir.mkdir(parents=True, exist_ok=True)
    staged: list[tuple[pl.DataFrame, str]] = []
    for dataset in datasets:
        scope = in_scope(vehicles, declaration(dataset).markets)
        due = _due(scope, statuses, dataset, force=force, fresh_after=now - windows[dataset],
                   no_data_after=now - min(windows[NO_DATA], windows[dataset]))
        no_data_due = int(due["last_outcome"].eq("no_data").sum())
        due = due.drop("last_outcome")
        if declaration(dataset).asks_mileage and due.height and roster is None:
            due = _valuation_mileage(db, due)
        path = None
        if due.height:
            path = _stage(due, staging_dir / f"due_{dataset}.parquet", staged)
        declared = declaration(dataset)  # batch-checked: 1 unit per VIN at submission
        endpoint = declared.batch_endpoint or declared.endpoint
        units = due.height if declared.batch_endpoint else due.height * estimate_units(endpoint)
        plan.datasets[dataset] = DatasetPlan(dataset, endpoint, listed, due.height, scope.height - due.height, units,
                                             path, no_data_due, not_applicable=listed - scope.height)
    return plan


def _valuation_mileage(db: Database, due: pl.DataFrame) -> pl.DataFrame:
    """`due` with the mileage valuations ask with (view `vehicle_mileage`: the file's, or a higher history
    reading), read for its VINs only: the history reports of VINs not due are never parsed."""
    db.connection.register("plan_mileage_vins", due.select("vin").to_arrow())
    try:
        chosen = db.query("plan_valuation_mileage")
    finally:
        db.connection.unregister("plan_mileage_vins")
    chosen = chosen.with_columns(pl.col("mileage").cast(due.schema["mileage"]),
                                 pl.col("mileage_unit").cast(due.schema["mileage_unit"]))
    return (due.drop("mileage", "mileage_unit").join(chosen, on="vin", how="left", maintain_order="left")
            .select(due.columns))


def _read_frame(db: Database, roster: pl.DataFrame, datasets: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`plan_roster` and `plan_status` for a roster not landed: only its VINs go to DuckDB, for the two
    lookups (specs' decoding market, last answers); the roster is sorted and joined here."""
    frame = roster.select(
        pl.col("vin"),
        *(pl.col(name).cast(dtype) if name in roster.columns else pl.lit(None, dtype).alias(name)
          for name, dtype in (("state", pl.String), ("mileage", pl.Int64), ("mileage_unit", pl.String),
                              ("condition", pl.String), ("country", pl.String))),
    )
    frame = frame[vin_order(frame["vin"])]
    # `read_fleet` gives one row per VIN, and plate-found VINs are only added when new (tasks/ingest/plates.py);
    # a VIN given twice anyway is planned once (its first row: the sort keeps equal VINs in order), as
    # landing keeps one row per VIN.
    repeated = (frame["vin"] == frame["vin"].shift(1)).fill_null(False)
    if repeated.any():
        frame = frame.filter(~repeated)
    db.connection.register("plan_roster_frame", frame.select("vin").to_arrow())
    try:
        decoded = db.query("plan_roster_frame")
        statuses = db.query("plan_status_frame", datasets=datasets)
    finally:
        db.connection.unregister("plan_roster_frame")
    if decoded.height:
        frame = frame.join(decoded, on="vin", how="left", maintain_order="left")
    else:
        frame = frame.with_columns(pl.lit(None, pl.Boolean).alias("specs_international"))
    return with_market(frame), statuses


DUE_COLUMNS = ("vin", "state", "mileage", "mileage_unit", "condition", "last_fetched_at", "last_outcome")


def _due(scope: pl.DataFrame, statuses: pl.DataFrame, dataset: str, *, force: bool, fresh_after: datetime,
         no_data_after: datetime) -> pl.DataFrame:
    """The VINs of `scope` (in its order) whose `dataset` answer is missing or stale; all of them with `force`.

    A "no data" answer (404) is fresh only until `no_data_after`.
    """
    last = (statuses.filter(pl.col("dataset") == dataset)
            .select("vin", pl.col("fetched_at").alias("last_fetched_at"), pl.col("outcome").alias("last_outcome")))
    rows = scope.select("vin", "state", "mileage", "mileage_unit", "condition")
    if last.height:
        rows = rows.join(last, on="vin", how="left", maintain_order="left")
    else:  # nothing answered yet (a new fleet): no join to pay
        rows = rows.with_columns(pl.lit(None, statuses.schema["fetched_at"]).alias("last_fetched_at"),
                                 pl.lit(None, pl.String).alias("last_outcome"))
    if force:
        return rows.select(DUE_COLUMNS)
    window = pl.when(pl.col("last_outcome") == NO_DATA).then(pl.lit(no_data_after)).otherwise(pl.lit(fresh_after))
    stale = pl.col("last_fetched_at").is_null() | (pl.col("last_fetched_at") < window)
    return rows.filter(stale).select(DUE_COLUMNS)


def _stage(due: pl.DataFrame, path: Path, staged: list[tuple[pl.DataFrame, str]]) -> str:
    """Write a due list as uncompressed Parquet (a third of zstd's time; the file lives one run), unless an
    identical list was just staged for another dataset: a new fleet's datasets mostly share one."""
    never_answered = due["last_fetched_at"].null_count() == due.height
    for earlier, earlier_path in staged:
        # Rows come from one roster row per VIN: lists with the same VINs and no last answer are equal, unless
        # one carries the valuation's mileage (`_valuation_mileage`).
        if (earlier.height == due.height and never_answered and earlier["last_fetched_at"].null_count() == due.height
                and earlier["vin"].equals(due["vin"]) and earlier["mileage"].equals(due["mileage"])
                and earlier["mileage_unit"].equals(due["mileage_unit"])):
            return earlier_path
    due.write_parquet(path, compression="uncompressed")
    staged.append((due, str(path)))
    return str(path)


def age_text(window: timedelta) -> str:
    """A window as `--fresh` writes it: 7d, 12h, 90m."""
    minutes = window.total_seconds() / 60
    for unit, size in (("d", 1440), ("h", 60)):
        if minutes >= size and minutes % size == 0:
            return f"{int(minutes // size)}{unit}"
    return f"{minutes:g}m"


def read_slice(path: str, offset: int = 0, length: int | None = None) -> list[dict]:
    """The rows of one chunk of a staged due list (all of it without a length)."""
    return pl.scan_parquet(path).slice(offset, length).collect().to_dicts()


def read_vins(path: str) -> list[str]:
    """Only the VINs of a staged due list: a million-VIN recall check needs no dict per row."""
    return pl.read_parquet(path, columns=["vin"])["vin"].to_list()
