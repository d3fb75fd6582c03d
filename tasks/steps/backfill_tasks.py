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
from typing import Any, Mapping

import polars as pl
from prefect import get_run_logger, task
from prefect.runtime import flow_run
from pydantic import ValidationError

from fleet_data.connectors import ENDPOINTS
from fleet_data.connectors.errors import MalformedResponseError
from fleet_data.connectors import models as m

from fleet_data.tasks.control import progress
from fleet_data.tasks.run.context import current
from fleet_data.tasks.datasets import REGISTRY, Live
from fleet_data.tasks.fetch.enrich import DATASETS as ENRICHMENT
from fleet_data.tasks.fetch.enrich import raw_answer
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.land.recover import land_journals
from fleet_data.tasks.land.landing import data_frames, fetch_status_frame
from fleet_data.tasks.land.shred import shred_batch_results
from fleet_data.tasks.control.logtext import fields
from fleet_data.tasks.plan.due import ALL_DATASETS, Plan
from fleet_data.tasks.plan.provenance import check_store
from fleet_data.tasks.settings import service_in_use
from fleet_data.tasks.steps.refresh_tasks import TASK
# A backfill's plan lives with the plans (tasks/plan/backfill.py); these names stay importable from here.
from fleet_data.tasks.plan.backfill import DUE_SCHEMA as DUE_SCHEMA
from fleet_data.tasks.plan.backfill import check_vins as check_vins
from fleet_data.tasks.plan.backfill import due_frames as due_frames
from fleet_data.tasks.plan.backfill import plan_from_frames as plan_from_frames
from fleet_data.tasks.plan.backfill import read_vins_file as read_vins_file

# Recalls are backfilled per VIN (`/v1/recalls`, 1 unit, campaigns listed): a batch is for whole fleets.
# Each dataset is fetched again by the name its per-VIN fetch goes by (tasks/datasets.py).
FETCHED_AS: Mapping[str, str] = Live(lambda: {n: d.fetched_as for n, d in REGISTRY.items() if d.fetched_as != n})
# The model each dataset's stored answers are parsed with (as the client does when fetching): its endpoint's.
MODELS: Mapping[str, type[m.Result]] = Live(lambda: {n: model for n, d in REGISTRY.items()
                                                     if (model := ENDPOINTS[d.endpoint].model) is not None})
@task(name="plan-backfill", **TASK)
def plan_backfill(run_id: str, datasets: list[str], vins: list[str] | None, vins_file: str | None,
                  failures_of: str | None, all_failures: bool, parameters: dict) -> Plan:
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
    service = service_in_use()
    check_store(db, current(run_id).db, service, bool(parameters.get("allow_clock_behind")))  # refused: nothing recorded
    db.start_run("backfill", [], parameters, run_id=run_id, prefect_flow_run_id=flow_run.id, service=service)
    frames = due_frames(db, datasets, vins, failures_of, all_failures)
    plan = plan_from_frames(run_id, frames, datasets, current(run_id).staging.run_dir)
    current(run_id).planned = {name: d.path for name, d in plan.datasets.items()}  # what it leaves pending, at its end
    plan.service = service
    reporter = progress.current()
    for name, d in plan.datasets.items():
        if d.due:
            reporter.start(FETCHED_AS.get(name, name), f"Backfilling {name}", d.due)
    get_run_logger().info("backfill %s: %s", run_id, fields({k: v.due for k, v in plan.datasets.items()}))
    return plan


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
            if dataset == "recalls" and row["endpoint"] == ENDPOINTS["recalls-batch-results"].path:
                stored = row["body"] if isinstance(row["body"], (str, bytes)) else json.dumps(body)
                checks = pl.from_arrow(shred_batch_results(stored, row["batch_id"], at, lossless=False)["recall_checks"])
                assert isinstance(checks, pl.DataFrame)
                batch_checks[run].append(checks)
            elif dataset == "recalls" and row["endpoint"] != ENDPOINTS["recalls"].path or not row["vin"]:
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
