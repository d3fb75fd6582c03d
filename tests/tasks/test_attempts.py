"""A chunk's earlier attempts (tasks/staging/attempts.py) and the copy a running chunk keeps on object storage
(tasks/staging/mirror.py), on fsspec's in-memory file system standing for a bucket; the killed-worker runs are in
tests/flows/test_distributed_faults.py."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone

import pytest

from fleet_data.connectors import CallRecord
from fleet_data.connectors.calls import CallIntent
from fleet_data.tasks.staging import area, mirror
from fleet_data.tasks.staging.attempts import EarlierAttempts
from fleet_data.tasks.staging.journal import AnswerJournal, read_journal
from fleet_data.tasks.staging.mirror import AHEAD, Mirror

RUN = "run-attempts"
NOW = datetime(2026, 11, 28, tzinfo=timezone.utc)


@pytest.fixture
def bucket():
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    staging = f"memory://bucket-{time.monotonic_ns()}/runs"
    yield staging
    fs.rm(staging.removeprefix("memory://"), recursive=True)


def _intent(n: int, vin: str) -> CallIntent:
    return CallIntent(f"call-{n}", "specs", "GET", "/specs", vin, 1, 1)


def _answer(journal: AnswerJournal, n: int, vin: str) -> None:
    record = CallRecord(endpoint="specs", method="GET", path="/specs", vin=vin, status=200, attempt=1, latency_ms=1.0,
                        units=1, error=None, will_retry=False, call_id=f"call-{n}")
    journal.answer((f"call-{n}", record, NOW, None), vin, "found", NOW, body=b"{}")


def test_a_running_journal_s_copy_is_never_more_than_AHEAD_calls_behind_it(bucket, tmp_path, monkeypatch):
    """Calls sent as fast as they come, with a copy that takes 20 ms to put: a call waits rather than get further
    ahead of the last copy than a re-run would count."""
    copies: list[int] = []  # sent records in each copy put, in order
    put = area.put_copy

    def slow_put(data, *args, **kwargs):
        time.sleep(0.02)
        where = put(data, *args, **kwargs)
        copies.append(read_journal_bytes(tmp_path, data).num_rows)  # each sent record, unanswered: a row
        return where

    monkeypatch.setattr(mirror, "put_copy", slow_put)
    behind: list[int] = []
    with AnswerJournal.create(tmp_path, RUN, "specs", chunk="specs-0") as journal, Mirror(journal, bucket):
        hook = journal.before_sent
        assert hook is not None

        def checked() -> None:
            hook()
            behind.append(journal.sent_count - copies[-1])  # this call, past the last copy put

        journal.before_sent = checked
        for n in range(500):
            journal.sent(_intent(n, f"VIN{n:014d}"), NOW)
    assert copies[0] == 0  # the claim, before the first call
    assert max(behind) < AHEAD and len(copies) > 500 // AHEAD  # it waited for copies rather than run ahead
    name = journal.path.name
    copy = area._fs(bucket).cat_file(f"{area.run_prefix(bucket, RUN)}/{name}")
    assert read_journal_bytes(tmp_path, copy).num_rows >= 500 - AHEAD


def read_journal_bytes(tmp_path, data: bytes):
    path = tmp_path / f"copy-{threading.get_ident()}-{time.monotonic_ns()}.arrows"
    path.write_bytes(data)
    try:
        return read_journal(path).table
    finally:
        path.unlink()


def test_a_re_run_asks_only_what_the_lost_attempt_was_not_answered_for_and_counts_what_its_copy_cannot_show(
        bucket, tmp_path):
    rows = [{"vin": f"VIN{n:014d}"} for n in range(200)]
    lost = tmp_path / "lost"  # the lost worker's scratch folder: out of the re-run's reach
    with AnswerJournal.create(lost, RUN, "specs", chunk="specs-400") as journal, Mirror(journal, bucket):
        for n, row in enumerate(rows[:30]):
            journal.sent(_intent(n, row["vin"]), NOW)
            if n < 25:  # the last five in flight when the worker died
                _answer(journal, n, row["vin"])
        journal.flush()
    area.put_copy(journal.path.read_bytes(), journal.path.name, bucket, RUN)  # its copy caught up with it

    other = AnswerJournal.create(lost, RUN, "specs", chunk="specs-4000")  # another chunk's: not this one's
    area.put_copy(other.path.read_bytes(), other.path.name, bucket, RUN)
    other.close()

    earlier = EarlierAttempts.of(bucket, RUN, "specs", 400)
    assert len(earlier.locations) == 1 and earlier.behind
    assert [row["vin"] for row in earlier.left(rows)] == [row["vin"] for row in rows[25:]]
    unseen = earlier.unseen("specs", rows)
    assert [i.vin for i in unseen] == [row["vin"] for row in rows[25:25 + AHEAD]]  # what it may have sent since
    assert {i.units for i in unseen} == {1}

    same_folder = EarlierAttempts.of(str(lost), RUN, "specs", 400)  # a folder both reach: every call is in it
    assert len(same_folder.locations) == 1 and not same_folder.behind and same_folder.unseen("specs", rows) == []
    assert EarlierAttempts.of(bucket, RUN, "specs", 20).locations == []  # a chunk run the first time
