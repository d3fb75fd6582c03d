"""Turn what a chunk fetched into table frames and land them in one transaction."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import polars as pl

from . import staging
from .enrich import DATASETS, ChunkResult
from .storage import Database

FETCH_STATUS_SCHEMA: staging.Schema = {"vin": pl.String, "dataset": pl.String, "outcome": pl.String, "fetched_at": staging.TS}
OWNERSHIP_SCHEMA: staging.Schema = {"vin": pl.String, "owner_count": pl.Int32, "vehicle": pl.String, "owners": pl.String,
                                    "fetched_at": staging.TS}

# Which table a dataset's answers land in, and how they are staged.
DATA_FRAMES = {
    "specs": lambda r: {"specs": staging.specs_frame(r.found)},
    "market_value": lambda r: {"market_values": staging.market_values_frame(r.found, r.requests)},
    "history": lambda r: {"history_reports": staging.history_frame(r.found)},
    "lien_theft": lambda r: {"lien_theft_events": staging.lien_theft_frame(r.found)},
    "ownership": lambda r: {"ownership_records": ownership_frame(r.found)},
    # Campaigns first, then the check that closes what it no longer lists: new and closed campaigns are
    # then told apart as they land (sql/changes/recalls.sql, recall_checks.landed.sql).
    "recall_details": lambda r: {
        "recalls": staging.recalls_frame([(vin, ans.data.recalls, at) for vin, ans, at in r.found]),
        "recall_checks": staging.recall_checks_from_reports(r.found, r.no_data),
    },
}
# recall details complete a recall check that the batch already recorded as fresh.
FAILURE_DATASET = {"recall_details": "recalls"}


def ownership_frame(found: list[tuple[str, Any, datetime]]) -> pl.DataFrame:
    rows = [
        {"vin": vin, "owner_count": len(r.owners),
         "vehicle": json.dumps(r.vehicle.model_dump(mode="json") if r.vehicle else None),
         "owners": json.dumps([o.model_dump(mode="json") for o in r.owners]), "fetched_at": at}
        for vin, r, at in found
    ]
    return pl.DataFrame(rows, schema=OWNERSHIP_SCHEMA, orient="row") if rows else pl.DataFrame(schema=OWNERSHIP_SCHEMA)


def fetch_status_frame(dataset: str, found: list[tuple[str, datetime]], no_data: list[tuple[str, datetime]]) -> pl.DataFrame:
    rows = [{"vin": v, "dataset": dataset, "outcome": "found", "fetched_at": at} for v, at in found]
    rows += [{"vin": v, "dataset": dataset, "outcome": "no_data", "fetched_at": at} for v, at in no_data]
    return pl.DataFrame(rows, schema=FETCH_STATUS_SCHEMA, orient="row") if rows else pl.DataFrame(schema=FETCH_STATUS_SCHEMA)


def raw_frame(result: ChunkResult) -> pl.DataFrame:
    endpoint = DATASETS[result.dataset].endpoint
    rows = [
        {"dataset": FAILURE_DATASET.get(result.dataset, result.dataset), "vin": vin, "batch_id": None,
         "endpoint": endpoint, "request_params": {"vin": vin, **result.requests.get(vin, {})}, "status": 200,
         "body": answer.raw, "fetched_at": at}
        for vin, answer, at in result.found
    ]
    return staging.raw_responses_frame(rows)


def land_enrichment(db: Database, run_id: str, result: ChunkResult) -> dict[str, int]:
    """Land a chunk: its data, freshness, failures, calls and raw answers, all or nothing."""
    frames: dict[str, pl.DataFrame] = dict(DATA_FRAMES[result.dataset](result))
    if result.dataset in FAILURE_DATASET:
        failures = [{**f, "dataset": FAILURE_DATASET[result.dataset]} for f in result.failed]
    else:
        failures = result.failed
        frames["fetch_status"] = fetch_status_frame(
            result.dataset, [(vin, at) for vin, _, at in result.found], result.no_data
        )
    frames["failures"] = staging.failures_frame(failures)
    frames["api_calls"] = staging.api_calls_frame(result.calls)
    frames["raw_responses"] = raw_frame(result)
    return db.land_chunk(frames, run_id)
