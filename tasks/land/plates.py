"""Land plate lookups: the resolutions, their calls, and each waiting row's place (roster, duplicate or rejected).

A run killed during its lookups leaves their journal (tasks/fetch/plates.py): the next run lands its calls and
resolutions (`land_plate_journal`) before it sorts its own plates, so a plate answered before the kill is
not bought again.
"""

from __future__ import annotations

import json
from dataclasses import replace

import polars as pl

from fleet_data.tasks.ingest.plates import (Lookup, PlateLookups, merge_into_roster, place_looked_up,
                                            resolutions_frame)
from fleet_data.tasks.land.frames import api_calls_frame
from fleet_data.tasks.land.landing import calls_not_recorded
from fleet_data.tasks.run.summary import PlateOutcome
from fleet_data.tasks.staging.journal import Journal
from fleet_data.tasks.store.database import Database, pack_vehicle_extras


def land_lookups(db: Database, run_id: str, waiting: pl.DataFrame, lookups: PlateLookups) -> PlateOutcome:
    """Land the lookups, their calls, and the waiting rows' places, in one transaction; returns their outcome."""
    found, rejected = place_looked_up(waiting, lookups)
    vins = found["vin"].unique().to_list()
    listed = db.query("run_roster_rows", run_id=run_id, vins=vins) if vins else pl.DataFrame({"vin": []}, schema={"vin": pl.String})
    bumped, new, added = merge_into_roster(listed, found)
    vehicles = pl.concat([bumped, pack_vehicle_extras(new)], how="diagonal_relaxed") if new.height else bumped
    db.land_chunk({"plate_resolutions": resolutions_frame(lookups), "api_calls": api_calls_frame(lookups.calls),
                   "vehicles": vehicles, "rejected_rows": rejected}, run_id)
    outcomes = [r.outcome for r in lookups.results.values()]
    return PlateOutcome(valid=added["valid"], duplicates=added["duplicates"], rejected=rejected.height,
                        rows=waiting.height, lookups=len(lookups.results) + len(lookups.not_looked_up),
                        found=outcomes.count("found"), not_found=outcomes.count("not_found"),
                        failed=outcomes.count("failed"), not_looked_up=len(lookups.not_looked_up),
                        calls=len(lookups.calls), units=lookups.units, stop_reason=lookups.stop_reason)


def lookups_from_journal(journal: Journal) -> PlateLookups:
    """The lookups a plate journal holds: every call (one never answered: `unknown`), every outcome."""
    # A plate's call is about no VIN: the journal's row has the VIN the lookup found, the ledger none.
    lookups = PlateLookups(calls=[(cid, replace(record, vin=None), at, None) for cid, record, at, _ in journal.calls()])
    for row in journal.table.select(["outcome", "request", "vin", "status", "message", "answered_at"]).to_pylist():
        if row["outcome"] is not None and row["request"]:
            asked = json.loads(row["request"])
            lookups.results[(asked.get("country"), asked.get("state"), asked["plate"])] = Lookup(
                row["outcome"], row["vin"], row["status"], row["message"], row["answered_at"])
    return lookups


def land_plate_journal(db: Database, journal: Journal) -> None:
    """A killed run's plate lookups, under that run, in one transaction: its resolutions, and its calls the
    ledger lacks (landed again, a journal changes nothing)."""
    lookups = lookups_from_journal(journal)
    db.land_chunk({"plate_resolutions": resolutions_frame(lookups),
                   "api_calls": calls_not_recorded(db, api_calls_frame(lookups.calls))}, journal.run_id)
