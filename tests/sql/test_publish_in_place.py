"""A publish writes what changed: the snapshot it replaced is kept and brought up to date, block by block.

Real DuckDB files. Each publish must leave the published file byte for byte the working store (whatever changed:
rows added, updated, deleted, the file grown or shrunk), write far less than the file when little changed, and never
write into a snapshot someone may still read: one a reader holds open (in another process, or in this one), or the
published file itself under a second name (a publish cut between its hard link and its rename).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

import fleet_data.tasks.store.published as published_module
from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.store.files import previous_path
from fleet_data.tasks.store.published import publish


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def store(tmp_path):
    db = tmp_path / "fleet.duckdb"
    with open_database(db) as store:
        store.connection.execute("CREATE TABLE readings AS SELECT range AS i, md5(range::VARCHAR) AS s FROM range(1500000)")
        assert publish(store, db) is not None
        yield store, db


@pytest.fixture
def written(monkeypatch):
    """The bytes each publish that brought a kept snapshot up to date wrote."""
    counts: list[int] = []
    real = published_module.update_open_copy

    def counted(source, target, block_size):
        counts.append(real(source, target, block_size))
        return counts[-1]

    monkeypatch.setattr(published_module, "update_open_copy", counted)
    return counts


def test_each_publish_is_the_store_byte_for_byte_and_writes_only_what_changed(store, written):
    store, db = store
    changes = [
        ("added", "INSERT INTO readings SELECT range + 10000000, 'new' FROM range(2000)"),
        ("updated", "UPDATE readings SET s = 'changed' WHERE i % 250000 = 3"),
        ("unchanged", ""),  # the snapshot kept is two publishes old: it still misses the update
        ("unchanged again", ""),
        ("deleted", "DELETE FROM readings WHERE i < 1000000"),  # the file may shrink
        ("grown", "CREATE TABLE more AS SELECT range AS j, md5(range::VARCHAR) AS t FROM range(800000)"),
        ("dropped", "DROP TABLE more"),
    ]
    inodes, wrote = set(), {}
    for name, change in changes:
        if change:
            store.connection.execute(change).fetchall()
        assert publish(store, db) is not None
        wrote[name] = written[-1] if written else None
        assert _digest(db) == _digest(Path(store.path)), name
        inodes.add(os.stat(db).st_ino)
        with duckdb.connect(str(db), read_only=True) as con:
            assert con.sql("SELECT count(*) FROM readings").fetchall() == store.connection.sql(
                "SELECT count(*) FROM readings").fetchall()
    # The first publish had no snapshot kept (the fixture's made the first file); every later one reused one.
    assert len(written) == len(changes) - 1 and wrote["added"] is None
    assert len(inodes) == 2  # two files take turns: the published one and the one kept for the next publish
    size = db.stat().st_size
    assert wrote["unchanged again"] < size // 100, (wrote, size)  # the headers and little else
    assert wrote["updated"] < size // 2, (wrote, size)  # 6 rows of 1,500,000


def test_a_kept_snapshot_a_reader_still_holds_is_not_written(store, written):
    store, db = store
    reader = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, duckdb
            con = duckdb.connect({str(db)!r}, read_only=True)
            count = lambda: con.sql("SELECT count(*), sum(hash(s)) FROM readings").fetchall()
            print(count(), flush=True)
            sys.stdin.readline()
            print(count(), flush=True)
            con.close()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None and reader.stdin is not None
        before = reader.stdout.readline().strip()
        for n in range(3):  # the reader's file is kept by the first publish, wanted by the second
            store.connection.execute("UPDATE readings SET s = $s WHERE i % 7 = 0", {"s": f"run {n}"}).fetchall()
            assert publish(store, db) is not None
            assert _digest(db) == _digest(Path(store.path))
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == before  # the snapshot it opened, untouched
    finally:
        reader.kill()
        reader.wait(timeout=30)
    # The first publish kept the reader's file; the second found it read, so copied in full; the third reused the
    # file the first one published.
    assert len(written) == 1


def test_a_kept_snapshot_this_process_still_reads_is_not_written(store, written):
    store, db = store
    with duckdb.connect(str(db), read_only=True) as con:
        before = con.sql("SELECT count(*), sum(hash(s)) FROM readings").fetchall()
        for n in range(3):
            store.connection.execute("UPDATE readings SET s = $s WHERE i % 7 = 0", {"s": f"run {n}"}).fetchall()
            assert publish(store, db) is not None
        assert con.sql("SELECT count(*), sum(hash(s)) FROM readings").fetchall() == before
    assert len(written) == 1  # as above


def test_the_published_file_under_a_second_name_is_never_written(store, written, tmp_path):
    """A publish cut after keeping the published file as `.previous` and before its rename leaves one file under
    both names: the next publish must not take it for a spare."""
    store, db = store
    previous_path(db).unlink(missing_ok=True)
    os.link(db, previous_path(db))
    os.link(db, tmp_path / "what-readers-see.duckdb")
    seen = _digest(db)
    store.connection.execute("UPDATE readings SET s = 'later' WHERE i < 1000").fetchall()
    assert publish(store, db) is not None
    assert _digest(tmp_path / "what-readers-see.duckdb") == seen
    assert _digest(db) == _digest(Path(store.path))
    assert written == []


def test_a_kept_snapshot_of_another_layout_is_rewritten_whole(store, written):
    """DuckDB's main header says how its file is laid out: a kept file whose header differs (another version's, or
    another block size) has no block compared, every one is written."""
    store, db = store
    store.connection.execute("UPDATE readings SET s = 'once' WHERE i < 10").fetchall()
    assert publish(store, db) is not None  # keeps the fixture's file
    kept = previous_path(db)
    kept.chmod(0o644)
    with kept.open("r+b") as file:
        file.seek(100)
        file.write(b"another layout")
    assert publish(store, db) is not None
    assert written == [db.stat().st_size]
    assert _digest(db) == _digest(Path(store.path))


def test_where_a_reader_cannot_be_told_every_publish_copies_and_keeps_nothing(store, written, monkeypatch):
    """Without /proc (macOS) or a lock to probe (Windows) a kept snapshot could not be known unread: none is kept,
    so none takes disk for nothing, and each publish is a whole copy."""
    store, db = store
    monkeypatch.setattr(published_module, "_reuse_possible", lambda: False)
    for n in range(3):
        store.connection.execute("UPDATE readings SET s = $s WHERE i < 10", {"s": f"run {n}"}).fetchall()
        assert publish(store, db) is not None
        assert not previous_path(db).exists()
        assert _digest(db) == _digest(Path(store.path))
    assert written == []
