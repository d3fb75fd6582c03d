"""A run's resources (tasks/control/resources.py): a full disk recognised, paid answers kept, a store that vanishes.

The full disk is real: a tmpfs of 2 MB (3 MB where a store and one copy must fit) the test mounts (we run as root;
skipped where mounting is refused).
"""

from __future__ import annotations

import errno
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest

from fleet_data.tasks.control import resources, stops
from fleet_data.tasks.staging.journal import AnswerJournal, read_journal
from tests.small_disk import tmpfs

RUN = "20260101T000000Z-resources"
AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def tiny_disk(tmp_path):
    with tmpfs(tmp_path / "disk", "2m") as disk:
        yield disk


@pytest.fixture
def room_for_one_copy(tmp_path):
    """A disk where a new store (1.06 MB: four 256 KiB blocks and the headers) and one copy of it fit."""
    with tmpfs(tmp_path / "disk", "3m") as disk:
        yield disk


@pytest.fixture
def watch():
    watched = resources.watch(RUN, 0)
    yield watched
    watched.close()
    resources.forget(RUN)
    stops.forget_run(RUN)


def _fill(disk: Path) -> None:
    with (disk / "ballast").open("wb", buffering=0) as out:
        for size in (1 << 16, 1 << 10, 1):
            try:
                while True:
                    out.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC


def test_a_full_disk_is_recognised_in_the_errors_each_writer_raises(tiny_disk):
    assert resources.is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert resources.is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert not resources.is_disk_full(OSError(errno.EACCES, "Permission denied"))
    _fill(tiny_disk)
    with pytest.raises(duckdb.Error) as raised:  # DuckDB's own words ("Could not write file ...: No space left")
        duckdb.connect(str(tiny_disk / "tiny.duckdb")).execute("CREATE TABLE t AS SELECT 1 AS a")
    try:
        raise RuntimeError("landing failed") from raised.value
    except RuntimeError as wrapped:
        assert resources.is_disk_full(wrapped)


def _answers(journal: AnswerJournal, first: int, n: int) -> None:
    for i in range(first, first + n):
        journal.answer(None, f"VIN{i:014d}", "found", AT, body={"vin": i, "pad": "x" * 2000})
    journal.flush()


def test_answers_paid_for_reach_the_disk_when_it_fills_through_the_reserve(tiny_disk, watch):
    watch.set_aside(tiny_disk / "fleet.duckdb.reserve", 256 * 1024)
    assert watch.reserve is not None
    journal = AnswerJournal(tiny_disk / "answers" / "specs-1.arrows", RUN, "specs")
    _answers(journal, 0, 10)
    _fill(tiny_disk)
    _answers(journal, 10, 20)  # refused for space: the reserve is given back, the write made again
    journal.close()
    assert watch.halted and watch.halted[0] == resources.NO_SPACE  # no new call starts
    assert stops.for_run(RUN).stopping()
    assert not (tiny_disk / "fleet.duckdb.reserve").exists()
    assert read_journal(journal.path).table.num_rows == 30  # every answer, none torn


def test_without_room_the_answers_wait_in_memory_and_the_file_holds_whole_records(tiny_disk, watch):
    journal = AnswerJournal(tiny_disk / "answers" / "specs-1.arrows", RUN, "specs")
    _answers(journal, 0, 10)
    _fill(tiny_disk)
    _answers(journal, 10, 20)  # no reserve: held in memory, the run halted
    assert watch.halted
    held = read_journal(journal.path)  # the file ends at its last whole record (one may fit in its last block's slack)
    assert 10 <= held.table.num_rows < 30 and held.damage is None and not held.torn
    (tiny_disk / "ballast").unlink()  # room again: the next flush writes what waited
    _answers(journal, 30, 1)
    journal.close()
    assert read_journal(journal.path).table.num_rows == 31


def test_a_file_deleted_or_replaced_is_seen(tmp_path, watch):
    store, lock = tmp_path / "fleet.duckdb.working", tmp_path / "fleet.duckdb.lock"
    store.write_bytes(b"x")
    lock.write_bytes(b"")
    watch.keep(store)
    watch.keep(lock)
    assert watch.check() is None
    lock.unlink()
    lock.write_bytes(b"")  # another file by the same name
    reason = watch.check()
    assert reason and "fleet.duckdb.lock was replaced by another file" in reason
    assert watch.halted == (resources.STORE_LOST, reason)


def test_duckdbs_lock_on_the_working_store_outlives_a_publish(tmp_path):
    """Publishing copies the working store; opening and closing it by name would drop DuckDB's POSIX lock on
    it (any descriptor closed does), and a second writer, let in by a deleted lock file, would get in too."""
    import sys

    from fleet_data.tasks.store.database import open_database
    from fleet_data.tasks.store.published import publish

    db = tmp_path / "fleet.duckdb"
    other = [sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1])", str(db) + ".working"]
    with open_database(db) as store:
        publish(store, db)
        assert db.is_file()
        second = subprocess.run(other, capture_output=True, text=True, timeout=120)
        assert second.returncode != 0 and "lock" in second.stderr.lower(), second.stderr[-500:]
    assert subprocess.run(other, capture_output=True, timeout=120).returncode == 0  # closed: free again


def test_a_publish_without_room_for_its_copy_is_not_made_and_leaves_no_partial_file(room_for_one_copy, monkeypatch):
    import os
    import shutil

    from fleet_data.tasks.run.context import hold_run

    monkeypatch.setenv("FLEET_MIN_FREE_MB", "0")
    monkeypatch.setenv("FLEET_RESERVE_MB", "0")
    db = room_for_one_copy / "fleet.duckdb"
    with hold_run(db, RUN, "refresh", say=lambda line: None) as session:  # published at once: the store is small
        context, before = session.context, db.read_bytes()
        working = room_for_one_copy / "fleet.duckdb.working"
        for _ in range(40):  # grow the store past what a copy of it would find free
            if os.stat(working).st_size > shutil.disk_usage(room_for_one_copy).free:
                break
            context.store.connection.execute("CREATE OR REPLACE TABLE ballast AS SELECT md5(random()::VARCHAR) || "
                                             "md5(random()::VARCHAR) AS x FROM range(20000 + 20000 * $n)", {"n": _})
            context.store.connection.execute("CHECKPOINT")
        assert os.stat(working).st_size > shutil.disk_usage(room_for_one_copy).free
        assert not context.publish()
        assert context.watch.halted and context.watch.halted[0] == resources.NO_SPACE
    assert not (room_for_one_copy / "fleet.duckdb.publishing").exists()
    assert db.read_bytes() == before
    stops.forget_run(RUN)
