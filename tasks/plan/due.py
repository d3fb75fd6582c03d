"""The refresh plan: which VINs are due per dataset, and what calling for them will cost.

A dataset applies to the vehicles of the markets its declaration names (tasks/ingest/markets.py); the
others are `not_applicable` and never called. An applicable VIN is due when its last successful
answer (`fetch_status`) is older than the dataset's freshness window, or when it never answered; also
when another service gave it (an answer is fresh only for the service that gave it: one recorded before
services were, NULL, counts as the run's), or when it is dated in the future beyond `CLOCK_TOLERANCE` (a
clock that was ahead): the plan counts those two apart, to say why it asks again. `force` makes every
applicable VIN due. A "no data" answer (a 404) has its own, shorter window
(`no_data`, 7 days): the service caches it for about a day and bills no 404. Due VIN lists are
staged as Parquet so chunk tasks take a path and a slice, not a list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, NamedTuple, Sequence

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
from fleet_data.tasks.settings import CLOCK_TOLERANCE
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
    pending_due: int = 0  # of `due`: VINs an earlier run left pending (a stop, a budget, faults), fresh or not
    failed_due: int = 0  # of `due`: open failures (worth asking again, fresh or not; else past the window since)
    answered_before: int | None = None  # of `due`: VINs with an earlier answer, so a change can show (None: not counted)
    other_service_due: int = 0  # of `due`: VINs whose last answer another service gave (never fresh for this one)
    future_due: int = 0  # of `due`: VINs whose last answer is dated in the future (a clock that was ahead)
    # Of `due`, valuations of Canadian vehicles whose mileage has no unit the file says (asked without it), and
    # the first UNIT_UNKNOWN_NAMED of their VINs: the summary counts and names them.
    unit_unknown: int = 0
    unit_unknown_vins: list[str] = field(default_factory=list)

    @property
    def unit_cost(self) -> int:
        """Units one due VIN costs: a recall batch bills one per VIN, a per-VIN call what its endpoint bills."""
        return 1 if declaration(self.dataset).batch_endpoint else estimate_units(self.endpoint)

    def chunks(self, size: int) -> list[tuple[int, int]]:
        return [(start, min(size, self.due - start)) for start in range(0, self.due, size)]


@dataclass
class Plan:
    run_id: str
    datasets: dict[str, DatasetPlan] = field(default_factory=dict)
    no_data_window: str | None = None  # e.g. "7d", shown with the plan
    plates: PlatePlan | None = None  # plate lookups for rows without a VIN, priced before any is made
    recall_details_waiting: int = 0  # VINs whose recall check counted recalls not yet detailed, not re-checked now
    service: str | None = None  # the service the plan was made for (connectors/config.py `service_name`)
    other_services: list[str] = field(default_factory=list)  # the services whose answers it asks again

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
        """Campaign details are priced after the batch says which VINs have recalls: at most one per VIN checked,
        and one per VIN an earlier check found recalls for whose campaigns are not looked up yet."""
        recalls = self.datasets.get("recalls")
        return recalls.due + self.recall_details_waiting if recalls else 0

    @property
    def nothing_due(self) -> bool:
        """Nothing to call: no dataset has a VIN due, no plate needs a lookup, no recall campaigns wait to be looked up."""
        return not self.plates and not self.recall_details_waiting and not any(d.due for d in self.datasets.values())

    def refusal(self, max_units: int | None) -> str | None:
        """Why `--max-units` refuses this plan before anything is called (None: it does not). One message for
        `refresh` and `backfill`, their dry runs included."""
        if max_units is None or self.estimated_units <= max_units:
            return None
        return f"the plan costs {self.estimated_units} units, more than --max-units {max_units}: nothing was called"


def declaration(dataset: str) -> Dataset:
    """The declaration of a plan dataset (tasks/datasets.py)."""
    return REGISTRY[dataset]


def applicability_table() -> str:
    """Which datasets apply to which vehicles, as the README shows it: the registry's table."""
    return docs_table()


@dataclass(frozen=True)
class DueRule:
    """When a VIN is due: with `force`, always; else when its answer is older than its dataset's window in
    `freshness` (each dataset's declared window by default), as of `now` (the clock by default), or dated
    beyond `now` + CLOCK_TOLERANCE, or given by a service other than `service` (None: any service's counts)."""

    force: bool = False
    freshness: dict[str, timedelta] | None = None
    now: datetime | None = None
    service: str | None = None


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
    unsettled, waiting = _unsettled(db, vehicles.select("vin"), list(datasets))
    plan = Plan(run_id, no_data_window=age_text(windows[NO_DATA]),
                plates=plan_plates(str(plates_waiting)) if plates_waiting and plates_waiting.exists() else None,
                service=rule.service)
    staging_dir.mkdir(parents=True, exist_ok=True)
    staged: list[tuple[pl.DataFrame, str]] = []
    others: set[str] = set()
    for dataset in datasets:
        scope = in_scope(vehicles, declaration(dataset).markets)
        cutoffs = Cutoffs(now - windows[dataset], now - min(windows[NO_DATA], windows[dataset]), now + CLOCK_TOLERANCE)
        due = _due(scope, statuses, unsettled, dataset, cutoffs, force=force, service=rule.service)
        why = _why_due(due, rule.service, now + CLOCK_TOLERANCE)
        others |= set(why.pop("services"))
        plan.datasets[dataset] = _dataset_plan(db, dataset, due, (vehicles.height, scope.height), staging_dir, staged,
                                               mileage=roster is None, why=why)
    plan.other_services = sorted(others)
    if "recalls" in plan.datasets and waiting.height:  # their details are asked whatever the batch finds
        checked = pl.read_parquet(plan.datasets["recalls"].path, columns=["vin"]) if plan.datasets["recalls"].path \
            else pl.DataFrame(schema={"vin": pl.String})
        plan.recall_details_waiting = waiting.join(checked, on="vin", how="anti").height
    return plan


def _dataset_plan(db: Database, dataset: str, due: pl.DataFrame, sizes: tuple[int, int], staging_dir: Path,
                  staged: list[tuple[pl.DataFrame, str]], mileage: bool, why: dict) -> DatasetPlan:
    """One dataset's plan from its due rows (`_due`): the list staged, what it costs and why each VIN is due.
    `sizes`: the roster's and the dataset's scope's; `mileage`: read the valuations' mileage (a landed roster);
    `why`: the counts `_why_due` gives."""
    counts: dict[str, Any] = {
        "no_data_due": int(due["last_outcome"].eq(NO_DATA).sum()), "pending_due": int(due["pending"].sum()),
        "failed_due": int((due["failed"] & ~due["pending"]).sum()),
        "answered_before": due.height - due["last_fetched_at"].null_count(), **why}
    due = due.drop("last_outcome", "last_service", "pending", "failed")
    if declaration(dataset).asks_mileage and due.height and mileage:
        due = _valuation_mileage(db, due)
    if declaration(dataset).asks_mileage:
        no_unit = due.filter(_unit_unknown())["vin"]
        counts.update(unit_unknown=no_unit.len(), unit_unknown_vins=no_unit.head(UNIT_UNKNOWN_NAMED).to_list())
    path = _stage(due, staging_dir / f"due_{dataset}.parquet", staged) if due.height else None
    declared = declaration(dataset)  # batch-checked: 1 unit per VIN at submission
    made = DatasetPlan(dataset, declared.batch_endpoint or declared.endpoint, sizes[0], due.height,
                       sizes[1] - due.height, 0, path, not_applicable=sizes[0] - sizes[1], **counts)
    made.estimated_units = due.height * made.unit_cost
    return made


def _unsettled(db: Database, vins: pl.DataFrame, datasets: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """What earlier runs left unsettled for `vins` (sql/queries/plan_unsettled.sql), one row per VIN and dataset
    (left pending wins over an older failure), and the VINs whose recall campaigns are waiting to be looked up."""
    db.connection.register("plan_unsettled_vins", vins.to_arrow())
    try:
        found = db.query("plan_unsettled", datasets=datasets)
        waiting = db.query("plan_details_waiting") if "recalls" in datasets else pl.DataFrame(schema={"vin": pl.String})
    finally:
        db.connection.unregister("plan_unsettled_vins")
    found = found.group_by("vin", "dataset").agg(pl.col("pending").any(), pl.col("retryable").drop_nulls().first(),
                                                 pl.col("failed_at").drop_nulls().first())
    return found, waiting


def _why_due(due: pl.DataFrame, service: str | None, future_after: datetime) -> dict:
    """Of `due`, the VINs asked again because another service answered last (and which services), or because
    their last answer is dated in the future: what the plan says besides the windows."""
    if not due.height:
        return {"other_service_due": 0, "future_due": 0, "services": []}
    other = due["last_service"].is_not_null() & (due["last_service"] != service) if service else due["vin"].is_null()
    future = ~other & (due["last_fetched_at"] > future_after).fill_null(False)
    return {"other_service_due": int(other.sum()), "future_due": int(future.sum()),
            "services": due.filter(other)["last_service"].unique().to_list()}


UNIT_UNKNOWN_NAMED = 20  # VINs the summary names of those whose mileage unit cannot be known


def _unit_unknown() -> pl.Expr:
    """Due rows whose mileage unit cannot be known (tasks/datasets.py `mileage_unit_unknown`, as an expression)."""
    return pl.col("mileage").is_not_null() & pl.col("mileage_unit").is_null() & pl.col("market").eq("CA").fill_null(False)


def due_rows(db: Database | None, dataset: str, path: str, offset: int = 0, length: int | None = None) -> list[dict]:
    """The rows of one chunk of a staged due list, as its fetch asks with them now.

    A dataset asking a mileage (valuations) reads it again from the store when its chunk starts (view
    `vehicle_mileage`): the history reports the run landed before it (flows/refresh.py fetches history
    first) count, so a vehicle's first valuation already asks with its best mileage. `db`: the run's store
    (None: the rows as planned).
    """
    declared = REGISTRY.get(dataset) or next((d for d in REGISTRY.values() if d.fetched_as == dataset), None)
    if db is None or declared is None or not declared.asks_mileage:
        return read_slice(path, offset, length)
    rows = pl.scan_parquet(path).slice(offset, length).collect()
    if not rows.height:
        return []
    return _with_mileage(rows, db.query("valuation_mileage_of_vins", vins=rows["vin"].to_list())).to_dicts()


def _valuation_mileage(db: Database, due: pl.DataFrame) -> pl.DataFrame:
    """`due` with the mileage valuations ask with (view `vehicle_mileage`: the file's, or a higher history
    reading), read for its VINs only: the history reports of VINs not due are never parsed."""
    db.connection.register("plan_mileage_vins", due.select("vin").to_arrow())
    try:
        chosen = db.query("plan_valuation_mileage")
    finally:
        db.connection.unregister("plan_mileage_vins")
    return _with_mileage(due, chosen)


def _with_mileage(due: pl.DataFrame, chosen: pl.DataFrame) -> pl.DataFrame:
    """`due` with the mileage columns of `chosen` (vin and MILEAGE_COLUMNS), in `due`'s order and types."""
    chosen = chosen.with_columns(pl.col(c).cast(due.schema[c]) for c in MILEAGE_COLUMNS)
    return (due.drop(*MILEAGE_COLUMNS).join(chosen, on="vin", how="left", maintain_order="left")
            .select(due.columns))


MILEAGE_COLUMNS = ("mileage", "mileage_unit", "mileage_source")


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


# What a due row carries: what a request is shaped by (the valuation's: tasks/datasets.py `valuation_request`),
# and why it is due.
DUE_COLUMNS = ("vin", "state", "mileage", "mileage_unit", "mileage_source", "condition", "market", "last_fetched_at",
               "last_outcome", "last_service", "pending", "failed")


class Cutoffs(NamedTuple):
    """When a dataset's answer stops being fresh (`fresh_after`; `no_data_after` for a "no data" one), and after
    when one is dated ahead of this clock (`future_after`; None: not checked)."""

    fresh_after: datetime
    no_data_after: datetime
    future_after: datetime | None = None


def _due(scope: pl.DataFrame, statuses: pl.DataFrame, unsettled: pl.DataFrame, dataset: str, cutoffs: Cutoffs, *,
         force: bool, service: str | None = None) -> pl.DataFrame:
    """The VINs of `scope` (in its order) due for `dataset`; all of them with `force`. Due: left pending by an
    earlier run, or failed worth asking again (5xx, no answer), fresh or not; else, unless a failure that cannot
    change by asking again (a 4xx) is younger than the dataset's window, an answer missing or stale.

    A "no data" answer (404) is fresh only until `no_data_after`; none is fresh when dated after `future_after`
    (a clock that was ahead would keep it fresh for as long again), nor when a service other than `service` gave
    it (NULL, before services were recorded, counts as `service`'s).
    """
    last = (statuses.filter(pl.col("dataset") == dataset)
            .select("vin", pl.col("fetched_at").alias("last_fetched_at"), pl.col("outcome").alias("last_outcome"),
                    pl.col("service").alias("last_service")))
    rows = scope.select("vin", "state", "mileage", "mileage_unit",
                        pl.when(pl.col("mileage").is_not_null()).then(pl.lit("fleet_file")).alias("mileage_source"),
                        "condition", "market")
    if last.height:
        rows = rows.join(last, on="vin", how="left", maintain_order="left")
    else:  # nothing answered yet (a new fleet): no join to pay
        rows = rows.with_columns(pl.lit(None, statuses.schema["fetched_at"]).alias("last_fetched_at"),
                                 pl.lit(None, pl.String).alias("last_outcome"),
                                 pl.lit(None, pl.String).alias("last_service"))
    open_ = unsettled.filter(pl.col("dataset") == dataset).drop("dataset")
    if open_.height:
        rows = rows.join(open_, on="vin", how="left", maintain_order="left")
    else:  # nothing left unsettled (most runs): no join to pay
        rows = rows.with_columns(pl.lit(None, pl.Boolean).alias("pending"), pl.lit(None, pl.Boolean).alias("retryable"),
                                 pl.lit(None, pl.Datetime("us", "UTC")).alias("failed_at"))
    rows = rows.with_columns(pl.col("pending").fill_null(False), pl.col("failed_at").is_not_null().alias("failed"))
    if force:
        return rows.select(DUE_COLUMNS)
    fresh_after, no_data_after, future_after = cutoffs
    window = pl.when(pl.col("last_outcome") == NO_DATA).then(pl.lit(no_data_after)).otherwise(pl.lit(fresh_after))
    stale = pl.col("last_fetched_at").is_null() | (pl.col("last_fetched_at") < window)
    if future_after is not None:
        stale = stale | (pl.col("last_fetched_at") > future_after)
    if service is not None:
        stale = stale | (pl.col("last_service").is_not_null() & (pl.col("last_service") != service))
    settled_for_now = pl.col("failed") & ~pl.col("retryable").fill_null(True) & (pl.col("failed_at") >= pl.lit(fresh_after))
    retry = pl.col("pending") | (pl.col("failed") & pl.col("retryable").fill_null(True))
    return rows.filter(retry | (stale & ~settled_for_now)).select(DUE_COLUMNS)


def _stage(due: pl.DataFrame, path: Path, staged: list[tuple[pl.DataFrame, str]]) -> str:
    """Write a due list as uncompressed Parquet (a third of zstd's time; the file lives one run), unless an
    identical list was just staged for another dataset: a new fleet's datasets mostly share one."""
    never_answered = due["last_fetched_at"].null_count() == due.height
    for earlier, earlier_path in staged:
        # Rows come from one roster row per VIN: lists with the same VINs and no last answer are equal, unless
        # one carries the valuation's mileage (`_valuation_mileage`).
        if (earlier.height == due.height and never_answered and earlier["last_fetched_at"].null_count() == due.height
                and earlier["vin"].equals(due["vin"]) and earlier["mileage"].equals(due["mileage"])
                and earlier["mileage_unit"].equals(due["mileage_unit"])
                and earlier["mileage_source"].equals(due["mileage_source"])):
            return earlier_path
    due.write_parquet(path, compression="uncompressed")
    staged.append((due, str(path)))
    return str(path)


def age_text(window: timedelta) -> str:
    """A window as `--fresh` writes it: 7d, 12h, 90m, 45s."""
    total = window.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if total >= size and total % size == 0:
            return f"{int(total // size)}{unit}"
    return f"{total:g}s"


def read_slice(path: str, offset: int = 0, length: int | None = None) -> list[dict]:
    """The rows of one chunk of a staged due list (all of it without a length)."""
    return pl.scan_parquet(path).slice(offset, length).collect().to_dicts()


def chunk_vin_ranges(path: str, chunks: list[tuple[int, int]]) -> list[tuple[str, str]]:
    """Each chunk's (lowest, highest) VIN in a staged due list: which VINs a chunk may hold, whatever the order."""
    vins = pl.read_parquet(path, columns=["vin"])["vin"]
    return [(str(part.min()), str(part.max())) for part in (vins.slice(offset, length) for offset, length in chunks)]


def read_vins(path: str) -> list[str]:
    """Only the VINs of a staged due list: a million-VIN recall check needs no dict per row."""
    return pl.read_parquet(path, columns=["vin"])["vin"].to_list()
