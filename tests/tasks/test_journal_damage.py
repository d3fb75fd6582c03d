"""Damaged journals are quarantined, never lost; calls never answered stay in the ledger.

A journal left by a killed run is landed by the next one (tasks/land/recover.py `land_journals`). Here the file
is damaged first, as a disk or a careless hand may leave it: truncated inside a record, a stretch zeroed, a bit
flipped, all of it zeroed. What reads whole before the damage lands (a real DuckDB file); the file itself is moved
to the staging area's quarantine folder with the reason beside it, and counted. A cut inside the last record is
what a kill leaves: landed and not quarantined, the cut record's call in the ledger as `unknown`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from fleet_data.connectors import CallRecord
from fleet_data.tasks.land.recover import land_journals
from fleet_data.tasks.staging.area import StagingArea
from fleet_data.tasks.staging.journal import AnswerJournal, read_journal
from fleet_data.tasks.store.database import open_database

RUN = "20260102T000000Z-damaged"
QUARANTINE, REASON_SUFFIX = "quarantine", ".reason.txt"  # <staging>/quarantine/<run>/<journal>, docs/ledger.md
ANSWERS = 40


def _vin(i: int) -> str:
    return f"1HGCM82633A{i:06d}"


def _write(folder: Path) -> tuple[Path, list[int]]:
    """A journal of `ANSWERS` no-data answers (one call each); returns it and where each record ends."""
    ends = []
    with AnswerJournal.create(folder, RUN, "specs") as journal:
        for i in range(ANSWERS):
            record = CallRecord(endpoint="specs", method="GET", path="/specs", vin=_vin(i), status=404, attempt=1,
                                latency_ms=3.0, units=0, error="NotFoundError", will_retry=False)
            at = datetime.now(timezone.utc)
            journal.answer((f"call-{i:03d}", record, at, None), _vin(i), "no_data", at)
            ends.append(journal.path.stat().st_size)
    return journal.path, ends


def _truncate_mid_record(data: bytes, ends: list[int]) -> bytes:
    return data[: ends[-2] + (ends[-1] - ends[-2]) // 2]  # inside the last record: a kill's torn tail


def _zero_a_stretch(data: bytes, ends: list[int]) -> bytes:
    start = ends[ANSWERS // 2] + 3  # inside the record after the 21st
    return data[:start] + bytes(64) + data[start + 64:]


def _flip_a_bit(data: bytes, ends: list[int]) -> bytes:
    at = ends[ANSWERS // 2] + 30  # in the 22nd record's payload
    return data[:at] + bytes([data[at] ^ 0x10]) + data[at + 1:]


def _flip_a_bit_in_the_last_record(data: bytes, ends: list[int]) -> bytes:
    at = ends[-2] + 30  # a whole last record with a bad checksum: damage, not a kill's torn tail
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


def _zero_the_tail(data: bytes, ends: list[int]) -> bytes:
    return data[: ends[ANSWERS // 2]] + bytes(len(data) - ends[ANSWERS // 2])  # the size kept, the end zeroed


def _zero_it_all(data: bytes, ends: list[int]) -> bytes:
    return bytes(len(data))


# kind -> (damage, answers that read whole before it, quarantined)
KINDS = {
    "truncated_mid_record": (_truncate_mid_record, ANSWERS - 1, False),
    "zeroed_stretch": (_zero_a_stretch, ANSWERS // 2 + 1, True),
    "zeroed_tail": (_zero_the_tail, ANSWERS // 2 + 1, True),
    "zeroed_whole_file": (_zero_it_all, 0, True),
    "bit_flipped": (_flip_a_bit, ANSWERS // 2 + 1, True),
    "bit_flipped_last_record": (_flip_a_bit_in_the_last_record, ANSWERS - 1, True),
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_journal_lands_what_is_whole_and_is_quarantined(tmp_path, kind):
    damage, whole, quarantined = KINDS[kind]
    staging = tmp_path / "staging"
    path, ends = _write(staging / RUN / "answers")
    original = path.read_bytes()
    path.write_bytes(damaged := damage(original, ends))

    db = open_database(tmp_path / "fleet.duckdb")
    try:
        db.start_run("refresh", run_id=RUN)
        counts = land_journals(db, staging, besides="the next run")
        landed = sorted(vin for (vin,) in db.sql("SELECT vin FROM fetch_status WHERE dataset = 'specs'").rows())
        calls = sorted(c for (c,) in db.sql("SELECT call_id FROM api_calls WHERE run_id = $r", {"r": RUN}).rows())
    finally:
        db.close()

    assert landed == sorted(_vin(i) for i in range(whole)), "the records before the damage land, only they"
    assert calls == [f"call-{i:03d}" for i in range(whole)]
    assert not path.exists()  # gone from where the next run would land it again
    kept = staging / QUARANTINE / RUN / path.name
    assert kept.exists() == quarantined
    assert counts["quarantined"] == int(quarantined) and counts["journals"] == 1
    if quarantined:
        assert kept.read_bytes() == damaged  # the evidence, as found
        reason = (staging / QUARANTINE / RUN / (path.name + REASON_SUFFIX)).read_text()
        assert reason.strip() and RUN in reason
        assert StagingArea(staging, "the next run").quarantined() == [kept]
        # The next run's housekeeping keeps it: no run deletes a quarantined journal.
        StagingArea(staging, "the next run").remove_leftovers()
        assert kept.exists()
    else:
        assert counts["torn"] == 1  # a kill's torn tail, said so, not damage


def test_a_call_sent_and_never_answered_is_in_the_ledger_as_unknown(tmp_path):
    """Killed with calls in flight: their sent records have no row. They land as `billing = 'unknown'` with the
    units they may have cost, so the ledger's sum is never below what the service billed."""
    from fleet_data.connectors.calls import CallIntent

    staging = tmp_path / "staging"
    at = datetime.now(timezone.utc)
    with AnswerJournal.create(staging / RUN / "answers", RUN, "specs") as journal:
        for i in range(3):
            journal.sent(CallIntent(f"call-{i}", "specs", "GET", "/specs", _vin(i), 1, 1), at)
        record = CallRecord(endpoint="specs", method="GET", path="/specs", vin=_vin(0), status=404, attempt=1,
                            latency_ms=3.0, units=0, error="NotFoundError", will_retry=False, call_id="call-0")
        journal.answer(("call-0", record, at, None), _vin(0), "no_data", at)
    read = read_journal(journal.path)
    assert read.damage is None and not read.torn
    db = open_database(tmp_path / "fleet.duckdb")
    try:
        db.start_run("refresh", run_id=RUN)
        counts = land_journals(db, staging, besides="the next run")
        rows = db.sql("SELECT call_id, vin, status, units, billing FROM api_calls ORDER BY call_id").rows()
        answered = db.sql("SELECT vin FROM fetch_status").rows()
    finally:
        db.close()
    assert rows == [("call-0", _vin(0), 404, 0, "known"), ("call-1", _vin(1), None, 1, "unknown"),
                    ("call-2", _vin(2), None, 1, "unknown")]
    assert answered == [(_vin(0),)]  # the calls in flight had no answer: their VINs are still due
    assert (counts["unknown_calls"], counts["possible_units"], counts["quarantined"]) == (2, 2, 0)
