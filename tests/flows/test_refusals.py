"""Refusals stop calling at once: a refused key or API costs the calls in flight, nothing more.

Scopes, as the service means them: 401 (key missing, unknown, inactive), 403 `blocked` and 402
`insufficient_credits` concern the whole key, so every endpoint stops; a 403 tier message and a 429
quota concern one API. The sandbox's per-endpoint counters are the referee, and every VIN not called
is pending with the reason, never failed.
"""

from __future__ import annotations

from collections import Counter

import pytest

from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.outputs.summary import summary_markdown
from fleet_data.tasks.settings import RefreshOptions

pytestmark = pytest.mark.usefixtures("prefect_server")

PER_VIN = {"specs": "/specs", "market_value": "/v2/marketvalue", "history": "/history", "lien_theft": "/v1/lien-theft"}


def run(fleet, db, **kw):
    kw.setdefault("lake", None)
    kw.setdefault("chunk_size", 8)
    kw.setdefault("concurrency", 3)
    return refresh_fleet([fleet], RefreshOptions(db=db, **kw))


def calls_by_endpoint(sandbox, status: int | None = None) -> Counter:
    counts: Counter = Counter()
    for row in sandbox.stats()["requests"]:
        if status is None or row["status"] == status:
            counts[row["endpoint"]] += row["count"]
    return counts


def assert_all_pending(result, datasets, reason: str) -> None:
    for name in datasets:
        d = result["datasets"][name]
        assert reason in (d["stop_reason"] or ""), (name, d)
        assert d["found"] == d["no_data"] == d["failed"] == 0, (name, d)
        assert d["pending"] == d["planned"], (name, d)  # not called: pending, due again next run


@pytest.mark.parametrize("key,status", [("test_unknown", 401), ("test_blocked", 403)])
def test_a_refused_key_stops_every_endpoint_after_one_call(service, fleet_file, db_path, read, key, status):
    sandbox = service(key)
    result = run(fleet_file(40), db_path)
    # Recall batches and four per-VIN datasets would all start at once; the first refusal of the key
    # stops them all before they call (before: 3 calls per endpoint, 13 in all).
    assert sandbox.count() == 1, calls_by_endpoint(sandbox)
    assert_all_pending(result, [*PER_VIN, "recalls"], str(status))
    assert result["status"] == "partial"
    # Nothing came back: the summary does not say "no changes", as if the vehicles had been compared (issue 30).
    said = summary_markdown(result)
    assert "No changes" not in said and "- No answer came back in this run, so nothing could change." in said
    assert read(db_path, "SELECT count(*) FROM failures")[0][0] == 0
    assert read(db_path, "SELECT count(*) FROM api_calls")[0][0] == sandbox.count()


def test_a_tier_refusal_stops_only_that_api_after_one_call(service, fleet_file, db_path, read):
    sandbox = service("test_basic_tier")
    result = run(fleet_file(40), db_path, datasets=list(PER_VIN))
    calls = calls_by_endpoint(sandbox)
    # The basic plan lacks history, lien/theft and v2 market value: one call learns it for each API.
    assert {e: calls[e] for e in ("/v2/marketvalue", "/history", "/v1/lien-theft")} == {
        "/v2/marketvalue": 1, "/history": 1, "/v1/lien-theft": 1}
    assert_all_pending(result, ["market_value", "history", "lien_theft"], "403")
    specs = result["datasets"]["specs"]
    assert specs["stop_reason"] is None and specs["found"] + specs["no_data"] == 40 == calls["/specs"]
    assert read(db_path, "SELECT count(*) FROM failures")[0][0] == 0


def test_running_out_of_credits_stops_every_endpoint(service, fleet_file, db_path, read):
    # --max-units runs one chunk at a time (specs, history, specs...): only the calls in flight when the
    # first 402 came back may follow it, all to the same endpoint; no other endpoint calls again.
    sandbox = service("test_prepaid_10")
    sandbox.record_journal()
    result = run(fleet_file(40), db_path, datasets=["specs", "history"], max_units=1000)
    journal = sandbox.journal()
    first = next(i for i, call in enumerate(journal) if call["status"] == 402)
    after = journal[first + 1:]
    assert len(after) <= 2 and all(c["endpoint"] == journal[first]["endpoint"] and c["status"] == 402 for c in after), after
    assert sandbox.units("test_prepaid_10") == 10
    for name in ("specs", "history"):
        d = result["datasets"][name]
        assert "402" in d["stop_reason"] and d["failed"] == 0, d
        assert d["found"] + d["no_data"] + d["pending"] == d["planned"] == 40
        assert d["pending"] > 0
    assert read(db_path, "SELECT count(*) FROM failures")[0][0] == 0
    assert read(db_path, "SELECT count(*) FROM api_calls")[0][0] == sandbox.count() == len(journal)


def test_a_quota_stops_its_api_with_at_most_the_calls_in_flight(service, fleet_file, db_path, read):
    sandbox = service("test_quota_12")
    result = run(fleet_file(40), db_path, datasets=["specs", "history"], concurrency=4)
    refused = calls_by_endpoint(sandbox, 429)
    # Each API has its own quota: each stops on its own, after at most the 4 calls in flight.
    assert 1 <= refused["/specs"] <= 4 and 1 <= refused["/history"] <= 4, refused
    for name in ("specs", "history"):
        d = result["datasets"][name]
        assert "429" in d["stop_reason"] and d["failed"] == 0
        assert d["found"] == 12 and d["found"] + d["no_data"] + d["pending"] == 40
    assert read(db_path, "SELECT count(*) FROM api_calls")[0][0] == sandbox.count()
