"""Answers an earlier run paid for and never landed (killed, or its landing failed): found in the staging
area (and on object storage with `--staging`), landed under the run that paid for them (the typed tables the
fetch staged beside a journal, else the journal shredded here), then deleted; a damaged one quarantined."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

import pyarrow.compute as pc

from fleet_data.tasks.land.frames import api_calls_frame
from fleet_data.tasks.land.landing import calls_not_recorded, land_answers, remove_staged, staged_at
from fleet_data.tasks.land.plates import land_plate_journal
from fleet_data.tasks.staging import area as staging_store
from fleet_data.tasks.staging.journal import (BATCH_CALLS, PLATE_LOOKUPS, SUFFIX, UNKNOWN, Journal, leftover_journals,
                                              read_journal)
from fleet_data.tasks.staging.staged_chunk import location as staged_chunk_location
from fleet_data.tasks.store.database import Database, DatabaseError


log = logging.getLogger(__name__)


def _run_of(location: str) -> str:
    """The run a journal's location names: `<staging>/<run_id>/answers/<file>`."""
    return location.rstrip("/").split("/")[-3]


def _ours(db: Database, found: list[str], besides: str | None) -> list[str]:
    """Of journals in a place several databases may share, those of this database's runs but `besides`.

    A run this database did not record is another's to land.
    """
    runs = {_run_of(u) for u in found} - {besides}
    ours = {run for run in runs if db.query("run_started_at", run_id=run).height}
    return [u for u in found if _run_of(u) in ours]


def _of(location: str) -> str:
    """The journal a location names by its file's name: `<dataset or journal kind>-<id>.arrows`."""
    return location.rstrip("/").rsplit("/", 1)[-1].split("-", 1)[0]


def land_journals(db: Database, staging_root: Path, *, besides: str | None = None,
                  store: str | None = None, only: tuple[str, ...] | None = None) -> dict[str, int]:
    """Land every journal an earlier run left (killed, or its landing failed), then delete it.

    Searched: the local staging folder; with `store` (`--staging s3://...`), the object-storage
    prefix and this machine's scratch folder, where a chunk bound for it journals until it is done
    (a chunk killed mid-fetch in the flow's threads or `--workers` leaves its journal there). Each
    file lands in one transaction under the run that paid for it, with the original fetch times; a
    failure leaves the file for the next attempt. Calls it sent and never saw answered land as
    `billing = 'unknown'` with what they may have cost. A damaged journal (tasks/staging/journal.py
    `Journal.damage`) lands its records before the damage and is quarantined with the reason, never
    deleted. `only`: the journals of these kinds alone (a run lands its plate lookups' before it sorts
    its plates). Returns counts for the log and the summary.
    """
    counts = {"journals": 0, "answers": 0, "calls": 0, "units": 0, "possible_units": 0, "unknown_calls": 0,
              "torn": 0, "quarantined": 0}
    area = staging_store.StagingArea(staging_root, besides or "", store)
    locations = [str(p) for p in leftover_journals(staging_root, besides=besides)]
    if staging_store.is_remote(store):
        assert store is not None
        scratch = [str(p) for p in leftover_journals(staging_store.scratch_root(), besides=besides)]
        locations += _ours(db, scratch, besides) + _ours(db, staging_store.find(store, f"*/answers/*{SUFFIX}"), besides)
        # A running chunk's copy on object storage (tasks/staging/mirror.py) whose journal is here: the journal is the
        # whole of it, and lands alone (the copy's calls still in flight must not overwrite their answered rows).
        whole = {Path(path).name for path in scratch}
        copies = [location for location in locations if staging_store.is_remote(location)
                  and location.rsplit("/", 1)[-1] in whole]
        for copy in copies:
            staging_store.remove(copy)
        locations = [location for location in locations if location not in copies]
    if only is not None:
        locations = [location for location in locations if _of(location) in only]
    for location in locations:
        with staging_store.opened(location) as path:
            journal = read_journal(path)
        if journal.table.num_rows:  # then its header, which names the run, was read
            _land(db, location, journal, counts)
        counts["journals"] += 1
        counts["torn"] += journal.torn
        if journal.damage:
            kept = area.quarantine(location, f"{journal.damage}; {journal.table.num_rows} rows before it landed "
                                             f"under run {journal.run_id}")
            staging_store.remove(staged_chunk_location(location))
            counts["quarantined"] += 1
            log.warning("%s: damaged (%s); what was readable landed, the file is kept in %s", location, journal.damage,
                        kept)
        else:
            remove_staged(location)
    return counts


def _land(db: Database, location: str, journal: Journal, counts: dict[str, int]) -> None:
    run_id = journal.run_id
    try:
        if journal.dataset in CALLS_OF:  # calls that answer no dataset: plate lookups, recall batch calls
            CALLS_OF[journal.dataset](db, journal)
        else:
            with staged_at(location) as typed:  # staged by the fetch before the kill, else shredded here
                land_answers(db, run_id, journal.dataset, typed or journal.table)
    except DatabaseError as exc:
        raise DatabaseError(f"{location}: the answers run {run_id} paid for could not land, the file "
                            f"stays for the next run ({exc})") from exc
    table = journal.table
    outcomes = pc.value_counts(table.column("outcome")).to_pylist()
    counts["answers"] += sum(c["counts"] for c in outcomes if c["values"] in ("found", "no_data", "failed"))
    counts["calls"] += table.num_rows - table.column("call_id").null_count
    unknown = pc.equal(table.column("billing"), UNKNOWN)
    possible = pc.sum(pc.if_else(unknown, table.column("units"), 0)).as_py() or 0
    counts["units"] += (pc.sum(table.column("units")).as_py() or 0) - possible
    counts["possible_units"] += possible
    counts["unknown_calls"] += pc.sum(pc.cast(pc.fill_null(unknown, False), "int64")).as_py() or 0


def _land_batch_calls(db: Database, journal: Journal) -> None:
    """A killed run's recall batch calls the ledger lacks (its batches' own ledger is resumed by the next run)."""
    db.land_chunk({"api_calls": calls_not_recorded(db, api_calls_frame(journal.calls()))}, journal.run_id)


# Journals of calls that answer no dataset, and how each lands.
CALLS_OF: dict[str, Callable[[Database, Journal], None]] = {PLATE_LOOKUPS: land_plate_journal,
                                                           BATCH_CALLS: _land_batch_calls}
