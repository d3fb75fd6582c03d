"""The fetch path keeps each answer as the (redacted) bytes the service sent: no result model per answer.

Against the sandbox over a real socket. The models stay the library's contract (`fleet lookup`, the
typed client); a chunk's answers are shredded in SQL when they land (tests/tasks/test_shred_equivalence.py).
"""

from __future__ import annotations

import orjson
import pytest

from fleet_data.connectors.models.base import Result
from fleet_data.connectors.redact import redact_text
from fleet_data.connectors.retry import RetryPolicy
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.fetch.enrich import DATASETS, fetch_chunk
from fleet_data.tasks.staging.journal import AnswerJournal, read_journal

VINS = ["1HGCM82633A004352", "1HGCM82633A004353", "1HGCM82633A004363", "1HGCM82633A000404"]


def models_built(monkeypatch) -> list[str]:  # noqa: ANN001
    """The names of the result models validated from now on (none, on the raw-first paths)."""
    built: list[str] = []
    validate = Result.model_validate.__func__  # type: ignore[attr-defined]

    def counting(cls, *args, **kwargs):  # noqa: ANN001, ANN202
        built.append(cls.__name__)
        return validate(cls, *args, **kwargs)

    monkeypatch.setattr(Result, "model_validate", classmethod(counting))
    return built


@pytest.mark.parametrize("dataset", [d for d in DATASETS if d != "ownership"])
async def test_a_chunk_keeps_the_answers_bytes_and_builds_no_model(sandbox, settings, tmp_path, monkeypatch, dataset):
    built = models_built(monkeypatch)
    rows = [{"vin": v, "state": "CA", "mileage": 1000} for v in VINS]
    with AnswerJournal.create(tmp_path, "run-raw", dataset) as journal:
        result = await fetch_chunk(dataset, rows, calls=Calls(settings=settings(), concurrency=2), journal=journal)
    assert result.found and built == []
    staged = {r["vin"]: r["body"] for r in read_journal(journal.path).table.to_pylist() if r["outcome"] == "found"}
    for vin, body, _ in result.found:
        assert isinstance(body, bytes) and body == staged[vin]
        assert orjson.loads(body)  # the answer's JSON, as the service sent it (redacted)


def test_reparse_shreds_stored_answers_without_a_model(monkeypatch):
    """`backfill --reparse` lands stored answers through the same SQL, no model per answer either."""
    from datetime import datetime, timezone

    from fleet_data.connectors.sandbox import vehicles as sandbox_vehicles
    from fleet_data.tasks.steps.backfill_tasks import parse_raw_rows

    built = models_built(monkeypatch)
    at = datetime(2026, 5, 1, tzinfo=timezone.utc)
    rows = [{"run_id": "r", "fetched_at": at, "vin": vin, "endpoint": "specs", "batch_id": None, "request_params": "{}",
             "body": orjson.dumps(sandbox_vehicles.specs(vin)).decode()} for vin in VINS[:3]]
    by_run, counts = parse_raw_rows("specs", rows)
    assert counts == {"found": 3, "failed": 0, "skipped": 0} and built == []
    assert sorted(by_run["r"]["specs"]["vin"].to_list()) == sorted(VINS[:3])


# -- the bytes as sent: a scripted service over a real loopback socket ---------------------------
SENT_KEY = "raw_bytes_key_7c1f"
# Spacing, member order, an escaped character and a trailing zero that a parse and re-serialise would
# all change; the key echoed in `input` and in a sentence, as a service may echo it.
SENT = (b'{ "success" : true,\n  "input": {"vin": "%s", "key": "' + SENT_KEY.encode() + b'"},\n'
        b'  "attributes": {"make": "Citro\\u00ebn", "price": 1.50, "year": "2020"},\n'
        b'  "colors": [], "note": "asked with ' + SENT_KEY.encode() + b'",\n'
        b'  "link": "https://vds.example/specs?vin=%s&key=another_key_of_theirs" }')


@pytest.fixture
async def scripted_specs():
    """/specs over loopback: `bodies[vin]` (bytes, JSON) when scripted, else SENT for that VIN."""
    from aiohttp import web

    bodies: dict[str, bytes] = {}

    async def specs(request: web.Request) -> web.Response:
        vin = request.query["vin"]
        body = bodies.get(vin, SENT.replace(b"%s", vin.encode()))
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/specs", specs)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    from fleet_data.connectors import Settings

    yield bodies, Settings(api_key=SENT_KEY, base_url=f"http://127.0.0.1:{runner.addresses[0][1]}")
    await runner.cleanup()


async def test_the_staged_answer_is_the_bytes_the_service_sent_with_the_key_redacted(scripted_specs, tmp_path):
    _, settings = scripted_specs
    with AnswerJournal.create(tmp_path, "run-raw", "specs", secrets=(SENT_KEY,)) as journal:
        result = await fetch_chunk(
            "specs",
            [{"vin": v} for v in VINS],
            calls=Calls(settings=settings, concurrency=2),
            journal=journal,
        )
    staged = {r["vin"]: r["body"] for r in read_journal(journal.path).table.to_pylist() if r["outcome"] == "found"}
    assert sorted(staged) == sorted(VINS) and not result.failed
    for vin, body, _ in result.found:
        sent = SENT.replace(b"%s", vin.encode())
        # Redacted as every text the client emits is: the key, and any `key=` in a URL.
        assert body == staged[vin] == redact_text(sent.decode(), (SENT_KEY,)).encode()
        assert b"another_key_of_theirs" not in body and b'"price": 1.50' in body
        assert SENT_KEY.encode() not in body


async def test_an_echoed_key_that_differs_from_ours_is_still_blanked(scripted_specs):
    """The service may echo `input.key` in another case: the echo is blanked whatever its value."""
    bodies, settings = scripted_specs
    vin = VINS[0]
    bodies[vin] = b'{"success": true, "input": {"vin": "%s", "key": "%s"}, "attributes": {}}' % (
        vin.encode(), SENT_KEY.upper().encode())
    result = await fetch_chunk("specs", [{"vin": vin}], calls=Calls(settings=settings))
    [(_, body, _)] = result.found
    assert orjson.loads(body)["input"] == {"vin": vin, "key": "[redacted]"}
    assert SENT_KEY.upper().encode() not in body


@pytest.mark.parametrize(("answer", "reason"), [
    (b'{"success": true, "attributes": "not an object"}', "attributes"),
    (b'{"success": true, "colors": {"not": "a list"}}', "colors"),
    (b'["a list, not an object"]', "not a JSON object"),
    (b'{"success": true, "attributes": {', "not valid JSON"),
    (b'{"success": true, "attributes": {}, "bad": NaN}', None),  # JSON's NaN: json.loads took it, so does the fetch
])
async def test_an_answer_that_is_not_what_specs_promise_fails_its_vin_only(scripted_specs, answer, reason):
    bodies, settings = scripted_specs
    bad, good = VINS[0], VINS[1]
    bodies[bad] = answer
    result = await fetch_chunk("specs", [{"vin": bad}, {"vin": good}], calls=Calls(settings=settings))
    found = {vin: body for vin, body, _ in result.found}
    assert good in found
    if reason is None:
        assert bad in found and orjson.loads(found[bad])["bad"] is None  # staged as valid JSON
        return
    assert [(f["vin"], f["status"]) for f in result.failed] == [(bad, 200)]
    assert reason in result.failed[0]["message"]
    assert result.failed[0]["attempts"] == (1 if reason != "not valid JSON" else 1 + RetryPolicy().max_retries)  # a torn body is retried


async def test_a_200_that_says_it_failed_is_classified_as_the_service_says(scripted_specs):
    bodies, settings = scripted_specs
    vin = VINS[0]
    bodies[vin] = b'{"success": false, "message": "No data found for this VIN"}'
    result = await fetch_chunk("specs", [{"vin": vin}], calls=Calls(settings=settings))
    # As before the fetch kept bytes: the VIN fails with the service's word, no answer staged.
    assert [(f["vin"], f["status"], f["message"], f["retryable"]) for f in result.failed] == [
        (vin, 200, "No data found for this VIN", False)]
    assert not result.found and not result.no_data


def test_a_journal_batch_reads_back_cell_for_cell_whether_a_column_repeats_or_not(tmp_path):
    """A batch's columns that hold one value throughout are written as that value repeated."""
    from datetime import datetime, timedelta, timezone

    from fleet_data.connectors import CallRecord

    at = datetime(2026, 11, 23, tzinfo=timezone.utc)
    rows = []
    with AnswerJournal.create(tmp_path, "run-batch", "specs") as journal:
        for i, status in enumerate([200, 200, 503, 200]):
            record = CallRecord(endpoint="specs", method="GET", path="/specs", vin=VINS[i], status=status,
                                attempt=1, latency_ms=12.5, units=int(status == 200), error=None,
                                will_retry=status == 503)
            call = (f"{i:032x}", record, at + timedelta(seconds=i), None)
            if status == 503:
                journal.attempt(call)
            else:
                journal.answer(call, VINS[i], "found", at, body=b'{"i": %d}' % i)
            rows.append((f"{i:032x}", VINS[i], status, int(status == 200), at + timedelta(seconds=i),
                         None if status == 503 else "found", None if status == 503 else b'{"i": %d}' % i))
    table = read_journal(journal.path).table
    assert table.num_rows == 4
    got = list(zip(*(table.column(c).to_pylist() for c in ("call_id", "vin", "status", "units", "called_at",
                                                             "outcome", "body"))))
    assert got == rows
    assert set(table.column("dataset").to_pylist()) == {"specs"} and set(table.column("error").to_pylist()) == {None}
