"""Landing does not write the store's file: a publish does, and closing the store. DuckDB's own 16 MB threshold
checkpointed every few chunks, and a checkpoint writes every index whole, so each chunk's landing cost more as the
store grew (tasks/store/database.py CHECKPOINTS; the figures are in docs/scale.md, from `make bench`)."""

from __future__ import annotations

import duckdb

from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.store.files import _wal, working_path
from fleet_data.tasks.store.published import publish
from tests.bench.test_landing_bench import make_specs_rows

CHUNK = 5_000


def test_chunks_landing_past_duckdbs_16_mb_log_leave_the_file_alone_until_a_publish_folds_them_in(tmp_path):
    db = tmp_path / "fleet.duckdb"
    rows = make_specs_rows(60_000)
    with open_database(db) as store:
        run_id = store.start_run("refresh")
        store.connection.execute("CHECKPOINT")
        working, log = working_path(db), _wal(working_path(db))
        size = working.stat().st_size
        for offset in range(0, rows.height, CHUNK):  # a transaction per chunk, as a run lands them
            store.land("specs", rows.slice(offset, CHUNK), run_id)
        assert log.stat().st_size > 16 * 2**20  # past DuckDB's default threshold: no checkpoint came
        assert working.stat().st_size == size  # nothing written into the file yet
        assert publish(store, db) is not None  # the publish checkpoints: the log folded into the file
        assert not log.exists() or log.stat().st_size == 0
        assert working.stat().st_size > size
    with duckdb.connect(str(db), read_only=True) as published:
        assert published.execute("SELECT count(*) FROM specs").fetchall() == [(rows.height,)]
