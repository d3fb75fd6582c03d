"""Backfill and re-parse: fetch chosen VINs again, or rebuild tables from stored raw answers.

Re-fetching reuses the refresh's chunk task (`fetch_dataset_chunk`); only the VIN lists
differ: VINs given by hand or a run's open failures, staged as Parquet like a plan.
Re-parsing reads `raw_responses` and lands them through the same SQL shredding as a fresh
fetch (tasks/land/shred.py, `sql/shred/`), without any HTTP call.
Rows re-parsed land under the run that fetched them, so a re-parse replaces rows
(recall checks are keyed by run) instead of adding copies.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping

import polars as pl
from prefect import get_run_logger, task
from prefect.runtime import flow_run
from pydantic import ValidationError

from fleet_data.connectors import ENDPOINTS, estimate_units
from fleet_data.connectors.errors import MalformedResponseError
from fleet_data.connectors import models as m

from fleet_data.tasks.control import progress
from fleet_data.tasks.run.context import current
from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.datasets import REGISTRY, Live
from fleet_data.tasks.fetch.enrich import DATASETS as ENRICHMENT
from fleet_data.tasks.fetch.enrich import raw_answer
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.land.recover import land_journals
from fleet_data.tasks.land.landing import data_frames, fetch_status_frame
from fleet_data.tasks.control.logtext import fields
from fleet_data.tasks.plan.due import ALL_DATASETS, DatasetPlan, Plan
from fleet_data.tasks.steps.refresh_tasks import TASK
from fleet_data.tasks.store.database import Database
from fleet_data.tasks.ingest.markets import with_market
from fleet_data.tasks.ingest.vins import normalise_vin, reject_reason

# Recalls are backfilled per VIN (`/v1/recalls`, 1 unit, campaigns listed): a batch is for whole fleets.
# Each dataset is fetched again by the name its per-VIN fetch goes by (tasks/datasets.py).
FETCHED_AS: Mapping[str, str] = Live(lambda: {n: d.fetched_as for n, d in REGISTRY.items() if d.fetched_as != n})
# The model each dataset's stored answers are parsed with (as the client does when fetching): its endpoint's.
MODELS: Mapping[str, type[m.Result]] = Live(lambda: {n: model for n, d in REGISTRY.items()
                                                     if (model := ENDPOINTS[d.endpoint].model) is not None})
DUE_SCHEMA = {"vin": pl.String, "state": pl.String, "mileage": pl.Int64, "mileage_unit": pl.String,
              "mileage_source": pl.String, "condition": pl.String, "market": pl.String}


# -- choosing VINs ------------------------------------------------------------------------------
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


def check_vins(db: Database, given: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Normalised, de-duplicated VINs to backfill, and the refused ones with the reason.

    A VIN is accepted when the roster holds it or it would be accepted into a roster.
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


def due_frames(db: Database, datasets: list[str], vins: list[str] | None, failures_of: str | None,
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


def plan_from_frames(run_id: str, frames: dict[str, pl.DataFrame], datasets: list[str], folder: Path) -> Plan:
    folder.mkdir(parents=True, exist_ok=True)
    plan = Plan(run_id)
    for dataset in datasets:
        due = frames.get(dataset)
        count = due.height if due is not None else 0
        path = None
        if due is not None and count:
            path = str(folder / f"backfill_{dataset}.parquet")
            due.write_parquet(path)
        endpoint = ENRICHMENT[FETCHED_AS.get(dataset, dataset)].endpoint
        plan.datasets[dataset] = DatasetPlan(dataset, endpoint, count, count, 0, count * estimate_units(endpoint), path)
    return plan


@task(name="plan-backfill", **TASK)
def plan_backfill(run_id: str, datasets: list[str], vins: list[str] | None, vins_file: str | None,
                  failures_of: str | None, all_failures: bool, parameters: dict) -> dict:
    """Record the backfill run and stage each dataset's VINs; refuses VINs that are neither on the roster nor valid."""
    unknown = [d for d in datasets if d not in ALL_DATASETS]
    if unknown:
        raise ValueError(f"unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(ALL_DATASETS)}")
    if vins_file:
        vins = read_vins_file(vins_file)
    db = current(run_id).store
    # What an earlier run paid for and never landed lands first (tasks/land/recover.py).
    recovered = land_journals(db, current(run_id).staging.root, besides=run_id)
    if recovered["journals"]:
        get_run_logger().info("landed what earlier runs paid for and never landed: %s", fields(recovered))
    if vins is not None:
        vins, refused = check_vins(db, vins)
        if refused:
            raise ValueError("not on the roster and not valid VINs: "
                             + ", ".join(f"{raw!r} ({reason})" for raw, reason in refused))
    db.start_run("backfill", [], parameters, run_id=run_id, prefect_flow_run_id=flow_run.id)
    frames = due_frames(db, datasets, vins, failures_of, all_failures)
    plan = plan_from_frames(run_id, frames, datasets, current(run_id).staging.run_dir)
    reporter = progress.current()
    for name, d in plan.datasets.items():
        if d.due:
            reporter.start(FETCHED_AS.get(name, name), f"Backfilling {name}", d.due)
    get_run_logger().info("backfill %s: %s", run_id, fields({k: v.due for k, v in plan.datasets.items()}))
    return plan.to_dict()


@task(name="record-recall-checks", **TASK)
def record_recall_checks(run_id: str) -> int:
    """Per-VIN recall lookups of a backfill count as fresh recall checks for the planner.

    (In a refresh the batch records them; `land_enrichment` leaves `fetch_status` to it.)
    """
    db = current(run_id).store
    checked = db.query("recall_checks_of_run", run_id=run_id).rows()
    if checked:
        answered = {o: [(vin, at) for vin, at, outcome in checked if outcome == o] for o in ("found", "no_data")}
        db.land("fetch_status", fetch_status_frame("recalls", answered["found"], answered["no_data"]), run_id)
    return len(checked)


# -- re-parsing ---------------------------------------------------------------------------------
def parse_raw_rows(dataset: str, rows: list[dict[str, Any]]) -> tuple[dict[str, dict[str, pl.DataFrame]], dict[str, int]]:
    """Stored answers -> table frames per run that fetched them, and counts (found, failed, skipped)."""
    fetched_as = FETCHED_AS.get(dataset, dataset)
    found: dict[str, list[list[tuple]]] = defaultdict(list)  # run -> layers of (vin, model, at), one VIN per layer
    requests: dict[str, list[dict[str, dict]]] = defaultdict(list)
    batch_checks: dict[str, list[pl.DataFrame]] = defaultdict(list)
    counts = {"found": 0, "failed": 0, "skipped": 0}
    for row in rows:
        run, at = row["run_id"], row["fetched_at"]
        try:
            body = json.loads(row["body"]) if isinstance(row["body"], str) else row["body"]
            if dataset == "recalls" and row["endpoint"] == "recalls-batch-results":
                items = [m.BatchResultItem.model_validate(i) for i in body.get("results") or []]
                batch_checks[run].append(staging.recall_checks_from_batch(items, row["batch_id"], at))
            elif dataset == "recalls" and row["endpoint"] != "recalls" or not row["vin"]:
                counts["skipped"] += 1  # a model listing: which VINs it settled is not in the answer
                continue
            else:
                answer = raw_answer(ENRICHMENT[fetched_as], body)  # its shape checked, as a fetch checks it
                asked = json.loads(row["request_params"] or "{}")
                asked.pop("vin", None)
                layers, asks = found[run], requests[run]
                depth = next((i for i, layer in enumerate(layers) if all(v != row["vin"] for v, _, _ in layer)), len(layers))
                if depth == len(layers):
                    layers.append([])
                    asks.append({})
                layers[depth].append((row["vin"], answer, at))
                asks[depth][row["vin"]] = asked
        except (ValidationError, MalformedResponseError, ValueError, TypeError, AttributeError):
            counts["failed"] += 1
            continue
        counts["found"] += 1
    out: dict[str, dict[str, pl.DataFrame]] = {}
    for run in set(found) | set(batch_checks):
        parts: dict[str, list[pl.DataFrame]] = defaultdict(list)
        for layer, layer_asks in zip(found.get(run, []), requests.get(run, [])):
            result = ChunkResult(fetched_as, found=layer, requests=layer_asks)
            for table, frame in data_frames(result).items():
                parts[table].append(frame)
        if batch_checks.get(run):
            parts["recall_checks"] = batch_checks[run] + parts.get("recall_checks", [])
        out[run] = {table: pl.concat(frames, how="vertical") for table, frames in parts.items()}
    return out, counts


@task(name="count-raw-responses", **TASK)
def start_reparse(run_id: str, datasets: list[str], parameters: dict) -> dict[str, int]:
    """Record the re-parse run; how many stored answers each chosen dataset holds."""
    unknown = [d for d in datasets if d not in MODELS]
    if unknown:
        raise ValueError(f"unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    db = current(run_id).store
    db.start_run("reparse", [], parameters, run_id=run_id, prefect_flow_run_id=flow_run.id)
    held = dict(db.query("raw_response_counts").iter_rows())
    counts = {d: int(held.get(d, 0)) for d in datasets}
    reporter = progress.current()
    for dataset, n in counts.items():
        if n:
            reporter.start(f"reparse:{dataset}", f"Re-parsing {dataset}", n)
    return counts


@task(name="reparse-chunk", task_run_name="reparse {dataset} {offset}+{length}", **TASK)
def reparse_chunk(run_id: str, dataset: str, offset: int, length: int) -> dict[str, int]:
    """Re-parse one page of stored answers and land it (one transaction per run that fetched them)."""
    db = current(run_id).store
    rows = db.query("raw_responses_to_reparse", dataset=dataset, limit=length, offset=offset).to_dicts()
    by_run, counts = parse_raw_rows(dataset, rows)
    for run, frames in sorted(by_run.items()):
        db.land_chunk(frames, run)
    current(run_id).publish_if_due()
    progress.current().advance(f"reparse:{dataset}", len(rows))
    get_run_logger().info("reparse %s %d+%d: %s", dataset, offset, length, fields(counts))
    return counts
