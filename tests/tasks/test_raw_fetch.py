"""The fetch path keeps each answer as the (redacted) bytes the service sent: no result model per answer.

Against the sandbox over a real socket. The models stay the library's contract (`fleet lookup`, the
typed client); a chunk's answers are shredded in SQL when they land (tests/tasks/test_shred_equivalence.py).
"""

from __future__ import annotations

import orjson
import pytest

from connectors.models.base import Result
from tasks.enrich import DATASETS, fetch_chunk
from tasks.journal import AnswerJournal, read_journal

VINS = ["1HGCM82633A004352", "1HGCM82633A004353", "1HGCM82633A004363", "1HGCM82633A000404"]


@pytest.mark.parametrize("dataset", [d for d in DATASETS if d != "ownership"])
async def test_a_chunk_keeps_the_answers_bytes_and_builds_no_model(sandbox, settings, tmp_path, monkeypatch, dataset):
    built: list[str] = []
    validate = Result.model_validate.__func__  # type: ignore[attr-defined]

    def counting(cls, *args, **kwargs):  # noqa: ANN001, ANN202
        built.append(cls.__name__)
        return validate(cls, *args, **kwargs)

    monkeypatch.setattr(Result, "model_validate", classmethod(counting))
    rows = [{"vin": v, "state": "CA", "mileage": 1000} for v in VINS]
    with AnswerJournal.create(tmp_path, "run-raw", dataset) as journal:
        result = await fetch_chunk(dataset, rows, settings=settings(), concurrency=2, journal=journal)
    assert result.found and built == []
    staged = {r["vin"]: r["body"] for r in read_journal(journal.path).table.to_pylist() if r["outcome"] == "found"}
    for vin, body, _ in result.found:
        assert isinstance(body, bytes) and body == staged[vin]
        assert orjson.loads(body)  # the answer's JSON, as the service sent it (redacted)


def test_reparse_shreds_stored_answers_without_a_model(monkeypatch):
    """`backfill --reparse` lands stored answers through the same SQL, no model per answer either."""
    from datetime import datetime, timezone

    from connectors.sandbox import vehicles as sandbox_vehicles
    from tasks.backfill import parse_raw_rows

    built: list[str] = []
    validate = Result.model_validate.__func__  # type: ignore[attr-defined]

    def counting(cls, *args, **kwargs):  # noqa: ANN001, ANN202
        built.append(cls.__name__)
        return validate(cls, *args, **kwargs)

    monkeypatch.setattr(Result, "model_validate", classmethod(counting))
    at = datetime(2026, 5, 1, tzinfo=timezone.utc)
    rows = [{"run_id": "r", "fetched_at": at, "vin": vin, "endpoint": "specs", "batch_id": None, "request_params": "{}",
             "body": orjson.dumps(sandbox_vehicles.specs(vin)).decode()} for vin in VINS[:3]]
    by_run, counts = parse_raw_rows("specs", rows)
    assert counts == {"found": 3, "failed": 0, "skipped": 0} and built == []
    assert sorted(by_run["r"]["specs"]["vin"].to_list()) == sorted(VINS[:3])
