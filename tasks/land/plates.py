"""Land plate lookups: the resolutions, their calls, and each waiting row's place (roster, duplicate or rejected)."""

from __future__ import annotations

from typing import Any

import polars as pl

from fleet_data.tasks.ingest.plates import PlateLookups, merge_into_roster, place_looked_up, resolutions_frame
from fleet_data.tasks.land.frames import api_calls_frame
from fleet_data.tasks.store.database import Database, pack_vehicle_extras


def land_lookups(db: Database, run_id: str, waiting: pl.DataFrame, lookups: PlateLookups) -> dict[str, Any]:
    """Land the lookups, their calls, and the waiting rows' places, in one transaction; returns the counts."""
    found, rejected = place_looked_up(waiting, lookups)
    vins = found["vin"].unique().to_list()
    listed = db.query("run_roster_rows", run_id=run_id, vins=vins) if vins else pl.DataFrame({"vin": []}, schema={"vin": pl.String})
    bumped, new, added = merge_into_roster(listed, found)
    vehicles = pl.concat([bumped, pack_vehicle_extras(new)], how="diagonal_relaxed") if new.height else bumped
    db.land_chunk({"plate_resolutions": resolutions_frame(lookups), "api_calls": api_calls_frame(lookups.calls),
                   "vehicles": vehicles, "rejected_rows": rejected}, run_id)
    outcomes = [r.outcome for r in lookups.results.values()]
    return {"valid": added["valid"], "duplicates": added["duplicates"], "rejected": rejected.height,
            "rows": waiting.height, "lookups": len(lookups.results) + len(lookups.not_looked_up),
            "found": outcomes.count("found"), "not_found": outcomes.count("not_found"),
            "failed": outcomes.count("failed"), "not_looked_up": len(lookups.not_looked_up),
            "calls": len(lookups.calls), "units": lookups.units, "stop_reason": lookups.stop_reason}
