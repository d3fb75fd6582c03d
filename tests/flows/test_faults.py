"""Fault reliability: at 30% of calls failing, with the spec's full `Retry-After: 60`, every VIN is accounted for.

The sandbox fails calls at random (5xx, hangs past the client's read timeout, dropped connections,
truncated bodies); 502/503/504 carry the spec's `Retry-After: 60`, which nothing shortens. A few
test VINs always give the same answer (404, 500, CV-001, 502, 503, 504). The run's retry window
(tasks/control/retry_window.py) is 75 s: once every first call is made, each VIN may still wait out one full
Retry-After; what waits longer ends pending. After a refresh, per dataset, each VIN of the fleet is in
exactly one place: landed (`fetch_status`), failed with a reason (`failures`), or counted pending in
`run_datasets`. The sandbox's call journal matches the run's `api_calls` call for call, and in it no
attempt follows a final answer (4xx, CV-001), goes past its retry budget or comes before its
Retry-After. A second run with faults off lands the rest and never calls again for what already
landed. A plan gate (403) and a quota (429) stop their endpoint, leaving VINs pending. One test keeps
a few VINs and one call slot, to see in the sandbox's journal that the slot served other VINs while a
retry waited. Below the flow: the transport resends nothing on its own, and an answer of the wrong
shape fails only its VIN. tests/bench/test_fault_bench.py times a 1,000-VIN refresh the same way.
"""

from __future__ import annotations

import contextlib
from collections import Counter, defaultdict
from typing import Callable, Iterator

import polars as pl
import pytest

from fleet_data.connectors import AsyncVehicleDataClient, Settings
from fleet_data.connectors import errors as e
from fleet_data.connectors.retry import RetryPolicy
from fleet_data.connectors.sandbox import Account, FaultConfig
from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.settings import RefreshOptions
from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.ingest.vins import check_digit

PER_VIN = {"specs": "/specs", "market_value": "/v2/marketvalue", "history": "/history", "lien_theft": "/v1/lien-theft"}
DATASET_OF = {**{path: d for d, path in PER_VIN.items()}, "/v1/recalls": "recalls"}
# The spec's error catalog: these answers are final, whatever the body says.
NON_RETRYABLE = {400, 401, 402, 403, 404, 405, 409, 429}
POLICY = RetryPolicy()
MOST_ATTEMPTS = 1 + POLICY.max_retries + POLICY.max_500_retries
# Test VINs by their last six characters, and how many calls each makes in a run where nothing else fails
# and the retry window is shorter than a Retry-After: 404 is final; 500 is retried once (backoff, no
# Retry-After); CV-001/CV-002 never; 502/503/504 wait 60 s, past the window: pending after one call.
MAGIC_ATTEMPTS = {"000404": 1, "000500": 2, "000501": 1, "000502": 1, "000503": 1, "000504": 1}
ALWAYS_FAILING = {"000500", "000501", "000502", "000503", "000504"}
WAITING = {"000502", "000503", "000504"}  # always answer with the full Retry-After
WINDOW = 75.0  # seconds: once every first call is made, one full Retry-After fits, a second does not
SHORT_WINDOW = 5.0  # the second run, faults off: only the always-failing VINs would wait
# What the client may retry after (CV-001/CV-002 is a ProviderAuthenticationError, never retried).
RETRYABLE_ERRORS = {"APIConnectionError", "APITimeoutError", "MalformedResponseError", "InternalServerError",
                    "BadGatewayError", "ServiceUnavailableError", "AutoRechargePendingError", "GatewayTimeoutError",
                    "UpstreamError"}
KEY = "fault_test_key_3b9d"
READ_TIMEOUT = 0.75  # shorter than the sandbox's hang, so the client times out on its own


def faults(share: float, seed: int) -> FaultConfig:
    """`share` of calls fail, split between upstream statuses, hangs, drops and garbled bodies."""
    return FaultConfig(rate=share * 0.55, statuses=[500, 502, 503, 504], timeout_rate=share * 0.15,
                       timeout_seconds=1.5, drop_rate=share * 0.15, malformed_rate=share * 0.15,
                       seed=seed)  # retry_after_seconds: the spec's 60


def magic_vin(serial: str, plant: str = "A") -> str:
    """A Honda test VIN with a valid check digit, answering as its last six characters say."""
    body = f"1HGCM82603{plant}{serial}"
    return body[:8] + check_digit(body) + body[9:]


def fleet_with_test_vins(fleet_file, tmp_path, n: int) -> tuple[str, list[str]]:
    rows = pl.read_csv(fleet_file(n), infer_schema=False)
    extra = pl.concat([rows.head(1).with_columns(pl.lit(magic_vin(s)).alias("vin")) for s in MAGIC_ATTEMPTS])
    rows = pl.concat([rows, extra])
    path = tmp_path / "fleet_with_test_vins.csv"
    rows.write_csv(path)
    return str(path), rows["vin"].to_list()


@pytest.fixture
def short_read_timeout(monkeypatch):
    monkeypatch.setenv("VDS_TIMEOUT", str(READ_TIMEOUT))  # hangs end on the client's side


@contextlib.contextmanager
def reader(db: str) -> Iterator[Callable[[str, str], list[tuple]]]:
    """`read(db, sql)` over one open database: opening it runs migrations and views, once is enough."""
    with open_database(db) as database:
        yield lambda _db, sql: database.sql(sql).rows()


def refresh(fleet: str, db: str, chunk_size: int = 20, window: float = WINDOW) -> dict:
    return refresh_fleet([fleet], RefreshOptions(db=db, lake=None, chunk_size=chunk_size, concurrency=8, retry_window=window))


def calls_by_vin(journal: list[dict]) -> dict[tuple[str, str], list[int]]:
    """Statuses the sandbox answered, per (endpoint, VIN), in arrival order."""
    calls: dict[tuple[str, str], list[int]] = defaultdict(list)
    for entry in journal:
        if entry["vin"]:
            calls[(entry["endpoint"], entry["vin"])].append(entry["status"])
    return calls


def assert_every_attempt_was_decided(journal: list[dict], read, db: str, run_id: str) -> None:
    """What the client recorded is what the sandbox saw, and no attempt followed a final answer.

    Per (endpoint, VIN), the sandbox's journal and the run's `api_calls` hold the same number of calls,
    and the same statuses in the same order unless the client gave up waiting on one (a timed-out call
    is journalled when the sandbox finishes it, and may have been answered after all). In the client's
    record, ordered by attempt, every attempt but the last got a retryable answer.
    """
    recorded: dict[tuple[str, str], list[tuple[int | None, str | None]]] = defaultdict(list)
    for endpoint, vin, status, error in read(db, "SELECT endpoint, vin, status, error_message FROM api_calls "
                                                 f"WHERE run_id = '{run_id}' AND vin IS NOT NULL ORDER BY attempt"):
        recorded[(endpoint, vin)].append((status, error))
    served = calls_by_vin(journal)
    assert {k: len(v) for k, v in recorded.items()} == {k: len(v) for k, v in served.items()}
    for key, attempts in recorded.items():
        statuses = [status for status, _ in attempts]
        if not any(error == "APITimeoutError" for _, error in attempts):
            assert [s if s is not None else 0 for s in statuses] == served[key], (key, attempts, served[key])
        for status, error in attempts[:-1]:
            assert status not in NON_RETRYABLE and error in RETRYABLE_ERRORS, (key, attempts)
        assert len(attempts) <= MOST_ATTEMPTS, (key, attempts)
        assert statuses[:-1].count(500) <= POLICY.max_500_retries, (key, attempts)  # 500: once


def assert_retries_came_after_their_retry_after(read, db: str, run_id: str) -> None:
    """Per call, an attempt after a 502/503/504 (each carries `Retry-After: 60`) came at least 60 s later."""
    answered: dict[tuple[str, str], list[tuple[int | None, float]]] = defaultdict(list)
    for endpoint, vin, status, at in read(db, "SELECT endpoint, vin, status, epoch(fetched_at) FROM api_calls "
                                              f"WHERE run_id = '{run_id}' AND vin IS NOT NULL ORDER BY attempt"):
        answered[(endpoint, vin)].append((status, at))
    waited = 0
    for key, attempts in answered.items():
        for (status, at), (_, next_at) in zip(attempts, attempts[1:]):
            if status in (502, 503, 504):
                waited += 1
                assert next_at - at >= 60, (key, attempts)  # the answer came back; the retry left 60 s later
    assert waited, "no retry after a Retry-After was seen"


def assert_failures_count_their_attempts(journal: list[dict], read, db: str, run_id: str) -> None:
    """A failure recorded by this run says how many calls it took: as many as the sandbox served."""
    served = calls_by_vin(journal)
    rows = read(db, f"SELECT dataset, vin, run_attempts FROM failures WHERE run_id = '{run_id}'")
    for dataset, vin, attempts in rows:
        if dataset in PER_VIN:
            assert attempts == len(served[(PER_VIN[dataset], vin)]), (dataset, vin, attempts)


def accounted(read, db: str, run_id: str, fleet: set[str], dataset: str) -> tuple[set[str], set[str], int]:
    """Landed, failed (open, with a reason) and pending VINs of one dataset; asserts they cover the fleet once."""
    landed = {v for (v,) in read(db, f"SELECT vin FROM fetch_status WHERE dataset = '{dataset}'")}
    failures = read(db, "SELECT vin, status, message, attempts FROM failures "
                        f"WHERE dataset = '{dataset}' AND resolved_at IS NULL")
    failed = {v for v, *_ in failures}
    assert all(message and attempts >= 1 for _, _, message, attempts in failures), failures
    (pending,) = read(db, f"SELECT pending FROM run_datasets WHERE run_id = '{run_id}' AND dataset = '{dataset}'")[0]
    assert landed <= fleet and failed <= fleet
    if dataset != "recalls":  # a recall check can land while its campaign details failed (checked below)
        assert not landed & failed, landed & failed
    assert len(landed | failed) + pending == len(fleet), (dataset, len(landed), len(failed), pending)
    return landed, failed, pending


@pytest.mark.usefixtures("prefect_server")
def test_every_vin_lands_or_fails_with_a_reason(service, fleet_file, db_path, tmp_path, short_read_timeout,
                                                monkeypatch):
    """30% of calls failing (10% before: the 30% case covers it), the full Retry-After, a 75 s retry window."""
    sandbox = service(KEY)
    fleet_path, vins = fleet_with_test_vins(fleet_file, tmp_path, 30)
    fleet = set(vins)
    sandbox.set_faults(faults(0.30, seed=30))
    sandbox.record_journal(True)

    first = refresh(fleet_path, db_path)
    journal = sandbox.journal()
    run_id = first["run_id"]
    with reader(db_path) as read:
        # Every kind of fault reached the client (the seed fixes the draws; each kind is among the first 150).
        seen = {error for (error,) in read(db_path, "SELECT DISTINCT error_message FROM api_calls")}
        assert {"APITimeoutError", "APIConnectionError", "MalformedResponseError", "InternalServerError",
                "BadGatewayError", "ServiceUnavailableError"} <= seen, seen
        assert_every_attempt_was_decided(journal, read, db_path, run_id)
        assert_failures_count_their_attempts(journal, read, db_path, run_id)
        assert_retries_came_after_their_retry_after(read, db_path, run_id)
        # Calls without a VIN (recall batches) too: the client recorded every call the sandbox served, what
        # it recorded as spent from answers is what the sandbox billed, and a call never answered (a timeout,
        # a dropped connection) counts what it may have cost besides: the ledger never under-reports.
        calls, known, total = read(db_path, "SELECT count(*), sum(units) FILTER (WHERE billing = 'known'), "
                                            "sum(units) FROM api_calls")[0]
        assert (calls, known) == (len(journal), sandbox.units(KEY))
        assert total > known == read(db_path, "SELECT sum(units) FROM api_calls WHERE status IS NOT NULL")[0][0]

        landed, failed = {}, {}
        for dataset in [*PER_VIN, "recalls"]:
            landed[dataset], failed[dataset], _ = accounted(read, db_path, run_id, fleet, dataset)
            counts = first["datasets"][dataset]
            assert counts["found"] + counts["no_data"] == len(landed[dataset])
        for dataset in PER_VIN:
            # The test VINs that always fail do fail, or wait as pending, whatever faults came first (one
            # answering with the full Retry-After fails only if an injected 500 spent its budget first).
            for vin in (v for v in fleet if v[-6:] in ALWAYS_FAILING):
                assert vin in failed[dataset] or first["datasets"][dataset]["pending"], (dataset, vin)
            # Pending says why; a dataset whose waiting retries all ran out their budget inside the window
            # (a loaded machine makes the first calls late) has none pending, and then no reason.
            counts = first["datasets"][dataset]
            assert counts["stop_reason"] == ("retry window closed" if counts["pending"] else None), counts
        # No duplicates where the key is not enforced by the table: one valuation per VIN and request,
        # one batch check per VIN, one raw answer per VIN and dataset.
        assert read(db_path, "SELECT count(*) = count(DISTINCT (vin, valued_on, state, mileage, condition)) "
                             "FROM market_values")[0][0]
        assert not read(db_path, "SELECT dataset, vin FROM raw_responses WHERE vin IS NOT NULL GROUP BY ALL "
                                 "HAVING count(*) > 1")
        checks = read(db_path, "SELECT vin, count(*) FROM recall_checks WHERE checked_via = 'batch' GROUP BY vin")
        assert all(n == 1 for _, n in checks) and {v for v, _ in checks} == landed["recalls"]
        # Campaign details: each VIN with open recalls got its campaigns listed, failed, or is pending.
        due = {v for (v,) in read(db_path, "SELECT vin FROM recall_checks "
                                          "WHERE recall_count > 0 AND NOT campaigns_listed")}
        listed = {v for (v,) in read(db_path, "SELECT vin FROM recall_checks WHERE checked_via <> 'batch'")}
        details = read(db_path, f"SELECT failed, pending FROM run_datasets WHERE run_id = '{run_id}' "
                                "AND dataset = 'recall_details'")
        details_failed = failed["recalls"] & landed["recalls"]
        assert not listed & details_failed
        assert listed | details_failed <= due
        no_data = {v for v in due if v[-6:] == "000404"}  # has no recall report to list
        assert len(due - no_data) == len((listed | details_failed) - no_data) + (details[0][1] if details else 0)

    # Faults off: the next run lands everything but the test VINs that always fail, and calls for
    # nothing that already landed. Only those test VINs would wait: a short window.
    sandbox.set_faults(FaultConfig())
    monkeypatch.delenv("VDS_TIMEOUT")  # no call may time out now
    sandbox.reset_stats()
    second = refresh(fleet_path, db_path, window=SHORT_WINDOW)
    again = calls_by_vin(sandbox.journal())
    for (endpoint, vin), statuses in again.items():
        dataset = DATASET_OF[endpoint]
        if endpoint != "/v1/recalls":
            assert vin not in landed[dataset], (endpoint, vin)
        else:
            assert vin not in listed, (endpoint, vin)
        assert len(statuses) == MAGIC_ATTEMPTS.get(vin[-6:], 1), (endpoint, vin, statuses)
    with reader(db_path) as read:
        assert_every_attempt_was_decided(sandbox.journal(), read, db_path, second["run_id"])
        for dataset in PER_VIN:
            still_open = dict(read(db_path, "SELECT vin, status FROM failures WHERE resolved_at IS NULL "
                                            f"AND dataset = '{dataset}'"))
            # Each with the status its test VIN gives (CV-001/CV-002 is a 500), nothing else; those answering
            # with the full Retry-After are pending again, not failed, until a window holds their retries.
            assert {v: s for v, s in still_open.items() if v[-6:] not in WAITING} == {
                v: 500 if v[-6:] == "000501" else int(v[-3:]) for v in fleet if v[-6:] in ALWAYS_FAILING - WAITING}, dataset
            counts = second["datasets"][dataset]
            assert counts["pending"] == len(WAITING) and counts["stop_reason"] == "retry window closed", counts
            resolved = {v for (v,) in read(db_path, "SELECT vin FROM failures WHERE resolved_run_id = "
                                                    f"'{second['run_id']}' AND dataset = '{dataset}'")}
            assert resolved == failed[dataset] - set(still_open)


@pytest.mark.usefixtures("prefect_server")
def test_a_refusal_is_final_and_stops_the_endpoint(service, fleet_file, db_path, short_read_timeout):
    """Under 30% faults, a plan without history, lien/theft and v2 valuations (403) and a quota of 6 (429)."""
    sandbox = service("fault_basic_quota_6")
    sandbox.add_account("fault_basic_quota_6", Account(plan="basic", monthly_quota=6))
    fleet = set(pl.read_csv(fleet_path := fleet_file(20), infer_schema=False)["vin"])
    sandbox.set_faults(faults(0.30, seed=7))
    sandbox.record_journal(True)
    result = refresh(fleet_path, db_path, chunk_size=10)
    journal = sandbox.journal()
    with reader(db_path) as read:
        assert_every_attempt_was_decided(journal, read, db_path, result["run_id"])
        assert_failures_count_their_attempts(journal, read, db_path, result["run_id"])
        served = Counter(call["status"] for call in journal)
        assert served[403] and served[429], served

        for dataset in ("specs", "market_value", "history", "lien_theft", "recalls"):
            counts = result["datasets"][dataset]
            landed, failed, pending = accounted(read, db_path, result["run_id"], fleet, dataset)
            assert counts["found"] + counts["no_data"] == len(landed) and counts["failed"] == len(failed)
            # Only server-side failures are left as failures; a refusal leaves the VINs pending, with the reason.
            statuses = read(db_path, f"SELECT status, message FROM failures WHERE dataset = '{dataset}'")
            assert all(status in (None, 200) or status >= 500 for status, _ in statuses), statuses  # 200: garbled
            if dataset != "specs":  # refused (403; the batch 429), unless faults outlasted its retries first
                assert not landed and pending and counts["stop_reason"], counts
        assert result["datasets"]["specs"]["found"] <= 6 and "429" in result["datasets"]["specs"]["stop_reason"]
    # Once refused, an endpoint is called for no further VIN: only calls already in flight (fewer than the
    # 8 slots) come back after the refusal. (A chunk whose calls wait out a Retry-After hands them to the
    # next chunk, so the refusal may come in the second chunk.)
    for endpoint in ("/specs", "/v2/marketvalue", "/history", "/v1/lien-theft"):
        calls = [call for call in journal if call["endpoint"] == endpoint]
        refused_at = next(i for i, call in enumerate(calls) if call["status"] in (403, 429))
        before = {call["vin"] for call in calls[:refused_at]}
        after = {call["vin"] for call in calls[refused_at + 1:]} - before
        assert len(after) < 8, (endpoint, refused_at, after)
    # 20 VINs need 20 units: rejected whole with a 429, and never sent again after it. Before it, a
    # submit hit by an injected fault (5xx, hang, drop) is rightly retried with its idempotency key.
    submits = [call["status"] for call in journal if call["endpoint"] == "/v1/recalls-batch/submit"]
    assert submits and submits[-1] == 429 and submits.count(429) == 1, submits
    assert all(status is None or status >= 500 for status in submits[:-1]), submits


@pytest.mark.usefixtures("prefect_server")
def test_with_the_full_retry_after_a_waiting_vin_holds_no_slot(service, fleet_file, db_path):
    """The spec's `Retry-After: 60`, not shortened, and one call slot (`concurrency=1`).

    The seed makes the 1st and 3rd of six VINs' first calls answer 503 (and nothing else fail), so the
    test waits one Retry-After, not minutes. Each waiting VIN's retry comes after the other VINs were
    served by the only slot, and every VIN lands: none is lost, none failed.
    """
    sandbox = service(KEY)
    vins = set(pl.read_csv(fleet := fleet_file(6), infer_schema=False)["vin"])
    sandbox.set_faults(FaultConfig(rate=0.3, statuses=[503], seed=31))  # retry_after_seconds: the spec's 60
    sandbox.record_journal(True)
    result = refresh_fleet([fleet], RefreshOptions(db=db_path, lake=None, datasets=["specs"], concurrency=1))
    journal = [(c["vin"], c["status"]) for c in sandbox.journal() if c["endpoint"] == "/specs"]
    waited = [vin for vin, status in journal if status == 503]
    assert waited, journal  # the seed gave 503s
    for vin in waited:
        first, retry = journal.index((vin, 503)), journal.index((vin, 200))
        served_meanwhile = {v for v, status in journal[first + 1 : retry] if status == 200}
        assert served_meanwhile - {vin}, (vin, journal)  # the slot served others while this VIN waited
    assert {v for v, status in journal if status == 200} == vins
    assert result["datasets"]["specs"]["found"] + result["datasets"]["specs"]["no_data"] == len(vins)
    with reader(db_path) as read:
        assert {v for (v,) in read(db_path, "SELECT vin FROM fetch_status WHERE dataset = 'specs'")} == vins
        assert_every_attempt_was_decided(sandbox.journal(), read, db_path, result["run_id"])


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_a_dropped_connection_is_retried_only_by_our_policy(sandbox, transport):
    seen = []
    settings = Settings(api_key="drop_test_key", base_url=sandbox.url, transport=transport,
                        retry=RetryPolicy(max_retries=2, initial_backoff=0.001))
    async with AsyncVehicleDataClient(settings, on_call=seen.append) as client:
        await client.specs("1HGCM82633A004352")  # leaves a kept-alive connection in the pool
        sandbox.set_faults(FaultConfig(drop_rate=1.0))
        sandbox.reset_stats()
        with pytest.raises(e.APIConnectionError):
            await client.specs("1HGCM82633A004353")
    # 1 + 2 retries, each one recorded: the transport sends nothing of its own accord.
    assert len(seen) - 1 == 3
    assert sandbox.count("/specs") == 3


async def test_an_answer_of_the_wrong_shape_fails_its_vin_not_the_chunk():
    """Valid JSON that is not what the endpoint promises: that VIN fails with a reason, the rest land."""
    from aiohttp import web

    from fleet_data.tasks.fetch.enrich import fetch_chunk

    garbled = magic_vin("000777")

    async def specs(request: web.Request) -> web.Response:
        if request.query["vin"] == garbled:
            return web.json_response({"success": True, "attributes": "not an object"})
        return web.json_response({"success": True, "attributes": {"year": "2020", "make": "Honda"}})

    app = web.Application()
    app.router.add_get("/specs", specs)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    settings = Settings(api_key="shape_test_key", base_url="http://127.0.0.1:%d" % runner.addresses[0][1])
    vins = [magic_vin(f"00077{i}") for i in range(8)]  # 000777 among them
    try:
        result = await fetch_chunk("specs", [{"vin": v} for v in vins], calls=Calls(settings=settings, concurrency=3))
    finally:
        await runner.cleanup()
    assert sorted(v for v, _, _ in result.found) == sorted(set(vins) - {garbled})
    assert [(f["vin"], f["status"], f["attempts"]) for f in result.failed] == [(garbled, 200, 1)]
    assert "attributes" in result.failed[0]["message"] and result.failed[0]["retryable"]
    assert not result.pending and not result.no_data
