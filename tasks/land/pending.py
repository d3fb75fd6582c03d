"""What a run leaves pending: the VINs it planned that no answer or failure settled, landed in `left_pending`.

Worked out once, when the run finishes, from its due lists (the plan's staged files) and what landed since it
started: whatever stopped a VIN (a stop, the budget, the retry window, a paused endpoint, a chunk never started
or not waited for) it is found the same way, without the fetch or the landing keeping count per VIN. The view
vin_status then says which still wait, and the next refresh plans them (tasks/plan/due.py).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Mapping

import polars as pl

from fleet_data.tasks.store.database import Database

DETAILS = "recall_details"  # the campaigns of VINs whose recall check counted recalls (run_datasets' name)
NOT_SETTLED = "not answered by the run"  # when the run gave no reason (e.g. a chunk that never came back)


def record_left_pending(db: Database, run_id: str, planned: Mapping[str, str], reasons: Mapping[str, str | None],
                        details: bool) -> dict[str, int]:
    """Land, per dataset of `planned` (its staged due list), the VINs the run left pending with `reasons[dataset]`;
    with `details`, also the campaign details (`recall_details`) of VINs with recalls it did not look up."""
    started = db.query("run_started_at", run_id=run_id).item(0, 0)
    left: dict[str, list[str]] = {}
    for dataset, path in planned.items():
        db.connection.register("planned_vins", pl.read_parquet(path, columns=["vin"]).to_arrow())
        try:
            left[dataset] = db.query("left_pending_of_plan", dataset=dataset, started_at=started)["vin"].to_list()
        finally:
            db.connection.unregister("planned_vins")
    if details:
        left[DETAILS] = db.query("left_pending_details", run_id=run_id, started_at=started)["vin"].to_list()
    now = datetime.now(timezone.utc)
    rows = [{"vin": vin, "dataset": dataset, "reason": reasons.get(dataset) or NOT_SETTLED, "run_started_at": started,
             "fetched_at": now} for dataset, vins in left.items() for vin in vins]
    if rows:
        db.land("left_pending", pl.DataFrame(rows, schema={"vin": pl.String, "dataset": pl.String, "reason": pl.String,
                                                          "run_started_at": pl.Datetime("us", "UTC"),
                                                          "fetched_at": pl.Datetime("us", "UTC")}), run_id)
    return {dataset: len(vins) for dataset, vins in left.items()}
