"""The run summary shows spend as known plus possible: a call never answered may have been billed."""

from __future__ import annotations

from datetime import datetime, timezone

from fleet_data.connectors import CallRecord
from fleet_data.tasks.outputs.summary import final_status, headline, notes, record_chunk
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.steps.refresh_tasks import chunk_counts

AT = datetime(2026, 11, 26, tzinfo=timezone.utc)


def _call(n: int, status: int | None, units: int, unknown: bool) -> tuple:
    record = CallRecord(endpoint="specs", method="GET", path="/specs", vin=f"VIN{n}", status=status, attempt=1,
                        latency_ms=5.0, units=units, error=None if status else "APITimeoutError", will_retry=False,
                        call_id=f"call-{n}", unknown=unknown)
    return (record.call_id, record, AT, None)


def test_a_run_that_timed_out_calls_shows_what_they_may_have_cost_beside_what_it_spent():
    result = ChunkResult("specs", calls=[_call(1, 200, 1, False), _call(2, 200, 1, False), _call(3, None, 1, True)])
    summary = {"run_id": "r", "status": "running", "ingest": {}, "estimated_units": 3, "units": 0, "possible_units": 0,
               "calls": 0, "datasets": {"specs": {"calls": 0, "units": 0, "possible_units": 0, "stop_reason": None}}}
    record_chunk(summary["datasets"]["specs"], chunk_counts(result))
    final_status(summary)
    assert (summary["calls"], summary["units"], summary["possible_units"]) == (3, 2, 1)
    assert "spent 2 units in 3 calls (+ up to 1 for calls never answered)" in headline(summary)
    assert any("1 units possibly spent" in note for note in notes(summary))


def test_damaged_journals_in_quarantine_are_named_in_the_summary():
    summary = {"datasets": {}, "quarantined_journals": 2, "quarantine_folder": "/data/staging/quarantine"}
    assert any("2 damaged answer journals" in note and "/data/staging/quarantine" in note for note in notes(summary))


def test_the_summary_says_which_service_answered_and_why_fresh_answers_were_asked_again():
    summary = {"run_id": "r", "status": "completed", "ingest": {}, "estimated_units": 3, "units": 3, "calls": 3,
               "service": "embedded sandbox",
               "datasets": {"specs": {"other_service": 2, "future_dated": 0, "stop_reason": None},
                            "history": {"other_service": 0, "future_dated": 1, "stop_reason": None}}}
    assert headline(summary).startswith("run r: completed (answers from the embedded sandbox: made up, for trying the tool)")
    assert notes(summary) == ["asked again, though within their freshness windows: 2 specs answers of another service, "
                              "1 history answers dated in the future (never fresh)"]
    summary["service"] = "https://api.carsxe.com"
    assert headline(summary).startswith("run r: completed (answers from https://api.carsxe.com)")
