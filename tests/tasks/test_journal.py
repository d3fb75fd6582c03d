"""The answer journal: what a chunk paid for is on disk before any landing, and lands from there.

Against the sandbox over a real socket (in this process; one key per test), with answers of every
kind: found, no data, failing (500, retried 502), on every per-VIN dataset.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from fleet_data.connectors import CallRecord, RetryPolicy, Settings
from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.steps.backfill_tasks import FETCHED_AS, MODELS
from fleet_data.tasks.fetch.enrich import DATASETS, fetch_chunk
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.staging.journal import AnswerJournal, read_journal
from fleet_data.tasks.land.recover import land_journals
from fleet_data.tasks.store.database import DatabaseError, open_database

ROOT = Path(__file__).resolve().parents[2]
RUN = "20260101T000000Z-journal"
# Data everywhere; data and no recalls; no data anywhere; always 404; always 500; always 502 (retried).
VINS = ["1HGCM82633A004352", "1HGCM82633A004353", "1HGCM82633A004363", "1HGCM82633A000404",
        "1HGCM82633A000500", "1HGCM82633A000502"]
ROWS = [{"vin": v, "state": "CA", "mileage": 42_000 + i} for i, v in enumerate(VINS)]
PER_VIN = ("specs", "market_value", "history", "lien_theft", "recall_details")
QUICK_RETRIES = RetryPolicy(initial_backoff=0.001, max_backoff=0.01, max_retry_after=0.01)


@pytest.fixture(scope="module")
def sandbox():
    with run_sandbox(SandboxConfig()) as sb:
        yield sb


def settings(sandbox, key: str) -> Settings:
    return Settings(api_key=key, base_url=sandbox.url, retry=QUICK_RETRIES)


async def fetch(sandbox, key: str, dataset: str, directory: Path) -> tuple[ChunkResult, Path]:
    with AnswerJournal.create(directory, RUN, dataset, secrets=(key,)) as journal:
        result = await fetch_chunk(
            dataset,
            ROWS,
            calls=Calls(settings=settings(sandbox, key), concurrency=3),
            journal=journal,
        )
    return result, journal.path


class Capture:
    """Stands in for the store: keeps what `land_enrichment` would land."""

    def __init__(self) -> None:
        self.frames: dict[str, pl.DataFrame] = {}

    def land_chunk(self, frames, run_id):  # noqa: ANN001
        self.frames = frames
        return {t: f.height for t, f in frames.items()}


def frames_of(result: ChunkResult) -> dict[str, pl.DataFrame]:
    from fleet_data.tasks.land.landing import land_enrichment

    store = Capture()
    land_enrichment(store, RUN, result)  # type: ignore[arg-type]
    return store.frames


@pytest.mark.parametrize("dataset", PER_VIN)
async def test_a_journal_gives_back_the_chunk_it_recorded(sandbox, tmp_path, dataset):
    result, path = await fetch(sandbox, f"journal_roundtrip_{dataset}", dataset, tmp_path)
    assert len(result.calls) > len(VINS)  # the 502 VIN was retried: every attempt is a call
    assert result.found and result.failed and (result.no_data or dataset == "recall_details")

    journal = read_journal(path)
    assert (journal.run_id, journal.dataset) == (RUN, dataset)
    again = journal.chunk_result()
    assert again.calls == result.calls  # same call ids, records and times: `api_calls` lands once
    assert sorted(again.no_data) == sorted(result.no_data)
    assert sorted(again.failed, key=lambda f: f["vin"]) == sorted(result.failed, key=lambda f: f["vin"])
    assert again.requests == result.requests
    landed, recovered = frames_of(result), frames_of(again)
    assert landed.keys() == recovered.keys()
    for table, frame in landed.items():
        assert recovered[table].sort(frame.columns).equals(frame.sort(frame.columns)), table


def test_the_journal_parses_answers_with_the_models_reparse_uses():
    from fleet_data.connectors import ENDPOINTS

    for dataset in PER_VIN:
        assert ENDPOINTS[DATASETS[dataset].endpoint].model is MODELS[{v: k for k, v in FETCHED_AS.items()}.get(dataset, dataset)]


async def test_no_api_key_reaches_the_journal(sandbox, tmp_path):
    """/specs echoes the key in `input.key`, as the service does; no journal ever holds it."""
    canary = "journal_canary_9f3b2a7c"
    for dataset in PER_VIN:
        await fetch(sandbox, canary, dataset, tmp_path / dataset)
    assert b"[redacted]" in next((tmp_path / "specs").glob("*.arrows")).read_bytes()  # the echo, redacted
    files = list(tmp_path.glob("*/*.arrows"))
    assert len(files) == len(PER_VIN)
    for path in files:
        assert canary.encode() not in path.read_bytes()


def test_the_writer_redacts_a_key_the_answer_still_carries(tmp_path):
    """Defence in depth: even an answer the client did not clean is cleaned before the disk."""
    secret = "journal_secret_5d1e"
    with AnswerJournal.create(tmp_path, RUN, "specs", secrets=(secret,)) as journal:
        journal.answer(None, VINS[0], "found", datetime.now(timezone.utc),
                       body={"input": {"vin": VINS[0], "note": f"key={secret}"}})
        journal.answer(None, VINS[1], "failed", datetime.now(timezone.utc), message=f"bad key {secret}")
    data = journal.path.read_bytes()
    assert secret.encode() not in data
    assert read_journal(journal.path).table.num_rows == 2


def _call(i: int) -> tuple:
    record = CallRecord(endpoint="specs", method="GET", path="/specs", vin=f"VIN{i:014d}", status=200, attempt=1,
                        latency_ms=1.5, units=1, error=None, will_retry=False)
    return (f"call-{i}", record, datetime.now(timezone.utc), None)


def test_a_journal_cut_anywhere_reads_back_its_whole_records(tmp_path):
    """A kill may cut the file at any byte: what reads back is every record written whole, nothing else, and a
    cut inside the last record is a torn tail (what a kill leaves), never damage."""
    ends = []  # file size after each answer: where each record ends
    with AnswerJournal.create(tmp_path, RUN, "specs") as journal:
        for i in range(9):
            call = _call(i)
            journal.answer(call, call[1].vin, "found", call[2], body={"n": i})
            ends.append(journal.path.stat().st_size)  # on disk as soon as written: nothing waits for a batch
    whole = journal.path.read_bytes()
    assert ends == sorted(set(ends))
    cut = tmp_path / "cut.arrows"
    for size in range(0, ends[-1] + 1, 7):
        cut.write_bytes(whole[:size])
        read = read_journal(cut)
        complete = sum(end <= size for end in ends)
        assert read.damage is None, (size, read.damage)
        assert read.torn == (size not in (0, *ends)), size
        assert read.table.column("call_id").to_pylist() == [f"call-{i}" for i in range(complete)], size
    assert read_journal(journal.path).table.num_rows == 9


_WRITER = """
import sys, time
from datetime import datetime, timezone
from pathlib import Path
from fleet_data.connectors import CallRecord
from fleet_data.tasks.staging.journal import AnswerJournal

journal = AnswerJournal(Path(sys.argv[1]), "run", "specs")
i = 0
while True:
    record = CallRecord(endpoint="specs", method="GET", path="/specs", vin=f"V{i:016d}", status=200, attempt=1,
                        latency_ms=1.0, units=1, error=None, will_retry=False)
    journal.answer((f"call-{i}", record, datetime.now(timezone.utc), None), record.vin, "found",
                   datetime.now(timezone.utc), body={"i": i, "padding": "x" * 500})
    i += 1
    if i == 200:
        Path(sys.argv[2]).write_text("written")
"""


def test_a_writer_killed_mid_stream_leaves_a_readable_journal(tmp_path):
    path, marker = tmp_path / "killed.arrows", tmp_path / "marker"
    child = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(marker)], cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    read = read_journal(path)
    assert read.damage is None
    assert read.table.num_rows >= 200  # every answer written before the kill, the one being written at most torn
    assert read.table.column("call_id").to_pylist() == [f"call-{i}" for i in range(read.table.num_rows)]


async def test_a_journal_lands_once_however_often_it_is_landed(sandbox, tmp_path):
    """Recovery lands what a live landing would, under the original run; again changes nothing."""
    result, path = await fetch(sandbox, "journal_lands_once", "market_value", tmp_path / "staging" / RUN / "answers")
    live, recovered = open_database(tmp_path / "live.duckdb"), open_database(tmp_path / "recovered.duckdb")
    try:
        from fleet_data.tasks.land.landing import land_enrichment

        for db in (live, recovered):
            db.start_run("refresh", run_id=RUN)
        land_enrichment(live, RUN, result)
        landed = land_journals(recovered, tmp_path / "staging", besides="a later run")
        assert landed["journals"] == 1 and landed["calls"] == len(result.calls)
        assert not path.exists()
        tables = ("api_calls", "market_values", "fetch_status", "failures", "raw_responses")
        snapshot = lambda db: {t: db.sql(f"SELECT * EXCLUDE (run_id) FROM {t}").sort(pl.all()).rows() for t in tables}  # noqa: E731
        assert snapshot(recovered) == snapshot(live)
        assert recovered.sql("SELECT DISTINCT run_id FROM api_calls").rows() == [(RUN,)]

        # The landing committed, the kill came before the file was deleted: the next run lands it again.
        await fetch(sandbox, "journal_lands_once", "market_value", tmp_path / "staging" / "other" / "answers")
        before = snapshot(live)
        for leftover in (tmp_path / "staging" / "other" / "answers").glob("*"):
            journal = read_journal(leftover)
            land_enrichment(live, journal.run_id, journal.chunk_result())  # the landing that committed
        twice = snapshot(live)
        land_journals(live, tmp_path / "staging")
        assert snapshot(live) == twice
        assert len(twice["api_calls"]) == len(before["api_calls"]) * 2  # a second chunk's calls, each once
    finally:
        live.close()
        recovered.close()


async def test_a_landing_that_fails_leaves_the_journal(sandbox, tmp_path, monkeypatch):
    await fetch(sandbox, "journal_landing_fails", "specs", tmp_path / "staging" / RUN / "answers")
    db = open_database(tmp_path / "fleet.duckdb")
    try:
        def refuse(frames, run_id, fetched_at=None):  # noqa: ANN001
            raise DatabaseError("could not set lock on file")

        monkeypatch.setattr(db, "land_chunk", refuse)
        with pytest.raises(DatabaseError):
            land_journals(db, tmp_path / "staging")
        assert len(list((tmp_path / "staging").glob("*/answers/*.arrows"))) == 1
        monkeypatch.undo()
        assert land_journals(db, tmp_path / "staging")["journals"] == 1
        assert db.sql("SELECT count(*) FROM specs").item() > 0
        assert not list((tmp_path / "staging").glob("*/answers/*.arrows"))
    finally:
        db.close()



def test_a_batch_call_is_journalled_with_its_batch_and_an_older_journal_still_reads(tmp_path):
    """Recall batch calls name their batch, sent or answered (`api_calls.batch_id` lands from it); a journal
    written before records named a batch reads back whole, its calls under no batch."""
    import struct

    import orjson

    from fleet_data.connectors.calls import CallIntent
    from fleet_data.tasks.staging import journal as j

    at = datetime(2026, 1, 2, tzinfo=timezone.utc)
    submit = CallIntent("c-submit", "recalls-batch-submit", "POST", "/v1/recalls-batch/submit", None, 1, 40)
    status = CallIntent("c-status", "recalls-batch-status", "GET", "/v1/recalls-batch/status", None, 1, 0)
    answered = CallRecord(endpoint="recalls-batch-status", method="GET", path="/v1/recalls-batch/status", vin=None,
                          status=200, attempt=1, latency_ms=3.0, units=0, error=None, will_retry=False, call_id="c-status")
    with AnswerJournal.create(tmp_path, RUN, j.BATCH_CALLS) as journal:
        journal.sent(submit, at, "pending:k1")
        journal.sent(status, at, "b-77")
        journal.attempt(("c-status", answered, at, "b-77"))
    calls = {cid: (record.units, record.unknown, batch) for cid, record, _, batch in read_journal(journal.path).calls()}
    assert calls == {"c-status": (0, False, "b-77"), "c-submit": (40, True, "pending:k1")}

    head = orjson.dumps({"format": j.FORMAT, "run_id": RUN, "dataset": "specs"})
    sent = [orjson.dumps([cid, VINS[0], "specs", "/specs", "GET", 1, 1, 0]) for cid in ("c1", "c2")]  # 8 fields
    meta = orjson.dumps(["c1", VINS[0], "specs", "/specs", "GET", 1, 404, 0, 5.0, None, 0,
                         "no_data", 0, None, None, None, "known", False])  # no batch before its body flag
    older = tmp_path / "older.arrows"
    older.write_bytes(j._MAGIC + j._frame(j._HEAD, head) + b"".join(j._frame(j._SENT, s) for s in sent)
                      + j._frame(j._ROW, struct.pack("<I", len(meta)) + meta))
    read = read_journal(older)
    assert read.damage is None and not read.torn
    assert read.table.select(["call_id", "outcome", "billing", "batch_id"]).to_pylist() == [
        {"call_id": "c1", "outcome": "no_data", "billing": "known", "batch_id": None},
        {"call_id": "c2", "outcome": None, "billing": "unknown", "batch_id": None}]
