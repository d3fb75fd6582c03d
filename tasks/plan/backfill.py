"""A backfill's plan: the VINs it fetches again per dataset, and what that costs.

The VINs are given (by hand or in a file; each on the roster or a valid VIN) or an earlier run's open
failures (of one run, or of every run). Plain functions over the store's named queries: the backfill flow
stages the lists as Parquet, like a refresh's plan; `fleet backfill --dry-run` prices them from the published
database read-only, without staging anything, calling anything or starting Prefect.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from fleet_data.connectors import estimate_units
from fleet_data.tasks.datasets import REGISTRY
from fleet_data.tasks.ingest.markets import with_market
from fleet_data.tasks.ingest.vins import normalise_vin, reject_reason
from fleet_data.tasks.plan.due import DatasetPlan, Plan

DUE_SCHEMA = {"vin": pl.String, "state": pl.String, "mileage": pl.Int64, "mileage_unit": pl.String,
              "mileage_source": pl.String, "condition": pl.String, "market": pl.String}


def read_vins_file(path: str | Path) -> list[str]:
    """VINs from a file: Parquet (a `vin` column), or text/CSV (one per line; a `vin` header column if present)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    if path.suffix.lower() == ".parquet":
        frame = pl.read_parquet(path)
        column = next((c for c in frame.columns if c.strip().lower() == "vin"), None)
        if column is None:
            raise ValueError(f"{path}: no 'vin' column")
        return [v for v in frame[column].cast(pl.String).to_list() if v]
    lines = [line.strip() for line in path.read_text(encoding="utf-8-sig").splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    if not lines:
        return []
    header = [c.strip().lower() for c in lines[0].split(",")]
    if "vin" in header:
        index = header.index("vin")
        return [cells[index].strip() for line in lines[1:] if len(cells := line.split(",")) > index]
    return [line.split(",")[0].strip() for line in lines]


def check_vins(db: Any, given: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Normalised, de-duplicated VINs to backfill, and the refused ones with the reason.

    A VIN is accepted when the roster holds it or it would be accepted into a roster. `db`: the store, or the
    published database read-only (anything with its named queries).
    """
    normalised = list(dict.fromkeys(v for raw in given if (v := normalise_vin(raw))))
    on_roster = set(db.query("roster_rows_for_vins", vins=normalised)["vin"].to_list()) if normalised else set()
    accepted, refused = [], []
    for raw in given:
        vin = normalise_vin(raw)
        reason = None if vin in on_roster else reject_reason(raw)
        if reason:
            refused.append((raw, reason))
        elif vin is not None and vin not in accepted:  # no reason: normalise_vin gave a VIN
            accepted.append(vin)
    return accepted, refused


def due_frames(db: Any, datasets: list[str], vins: list[str] | None, failures_of: str | None,
               all_failures: bool) -> dict[str, pl.DataFrame]:
    """Per dataset, the VINs to fetch (with the roster's state and mileage where it knows them)."""
    if vins is not None:
        wanted = {d: pl.DataFrame({"vin": vins}, schema={"vin": pl.String}) for d in datasets}
    elif failures_of or all_failures:
        failed = db.query("failed_vins", run_id=failures_of, datasets=datasets)
        wanted = {d: failed.filter(pl.col("dataset") == d).select("vin") for d in datasets}
    else:
        raise ValueError("choose VINs: give VINs, a file of VINs, a run whose failures to fetch again, or all failures")
    every = sorted({v for frame in wanted.values() for v in frame["vin"].to_list()})
    roster = (db.query("roster_rows_for_vins", vins=every) if every
              else pl.DataFrame(schema={**DUE_SCHEMA, "country": pl.String}).drop("market"))
    roster = with_market(roster.with_columns(pl.col("mileage").cast(pl.Int64)))  # a valuation's unit follows it
    return {d: frame.join(roster, on="vin", how="left").select(list(DUE_SCHEMA)).sort("vin")
            for d, frame in wanted.items() if frame.height}


def plan_from_frames(run_id: str, frames: dict[str, pl.DataFrame], datasets: list[str], folder: Path | None) -> Plan:
    """The backfill's plan: per dataset its VINs (staged in `folder` as Parquet; None: priced, not staged)."""
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    plan = Plan(run_id)
    for dataset in datasets:
        due = frames.get(dataset)
        count = due.height if due is not None else 0
        path = None
        if due is not None and count and folder is not None:
            path = str(folder / f"backfill_{dataset}.parquet")
            due.write_parquet(path)
        endpoint = REGISTRY[dataset].endpoint  # per VIN: recalls by `/v1/recalls`, not as a batch
        plan.datasets[dataset] = DatasetPlan(dataset, endpoint, count, count, 0, count * estimate_units(endpoint), path)
    return plan


def chosen_datasets(datasets: list[str] | None, by_failures: bool, plan: Plan) -> Plan:
    """Without `--datasets`, a backfill of failures fetches only the datasets that had failures."""
    if by_failures and not datasets:
        plan.datasets = {k: d for k, d in plan.datasets.items() if d.due}
    return plan


def vin_counts(plan: Plan) -> dict[str, int]:
    """A backfill reads no file: its "rows in" are the VINs it was asked to fetch, per dataset at most."""
    vins = max((d.due for d in plan.datasets.values()), default=0)
    return {"rows_in": vins, "valid": vins, "duplicates": 0, "rejected": 0}
