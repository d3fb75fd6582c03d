"""The call scheduler: a waiting retry does not hold a slot, an endpoint failing for good is paused.

Against a small service of our own over loopback (it answers each VIN as the test scripts it and
records every call it serves, in order, with its time and Idempotency-Key), or against the sandbox.
What is asserted is what the service observed: the order of calls, and the retried call's time
against its Retry-After. No wall-time assertion: a bound (`asyncio.wait_for`) only keeps a broken
scheduler from hanging the suite.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from aiohttp import web

from fleet_data.connectors import Settings
from fleet_data.connectors import errors as e
from fleet_data.connectors.sandbox import FaultConfig, SandboxConfig, run_sandbox
from fleet_data.connectors.sandbox.recalls import campaign_pool
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.fetch.enrich import fetch_chunk
from fleet_data.tasks.fetch.lanes import fetch_turn, forget_run
from fleet_data.tasks.recalls.details import fetch_recall_details
from fleet_data.tasks.control.stops import PausePolicy, Stops

VINS = [f"1HGCM8263{d}A00435{i}" for d, i in zip("0123456789", range(10))]  # shape only: our service checks nothing
A, B, C, D, E = VINS[:5]
CHECKED = datetime.now(UTC) - timedelta(minutes=5)
SPECS = {"success": True, "attributes": {"year": "2020", "make": "Honda"}}


@dataclass
class Served:
    vin: str
    status: int
    at: float  # the service's monotonic clock when it answered
    key: str


@dataclass
class Service:
    """Answers /specs: each VIN's first calls as scripted (status, Retry-After), then 200."""

    script: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    served: list[Served] = field(default_factory=list)
    url: str = ""

    async def specs(self, request: web.Request) -> web.Response:
        vin = request.query["vin"]
        answers = self.script.get(vin) or []
        key = request.headers.get("Idempotency-Key", "")
        if answers:
            status, retry_after = answers.pop(0)
            self.served.append(Served(vin, status, time.monotonic(), key))
            return web.json_response({"success": False, "message": "Cannot access the internet at this time",
                                      "retryable": True}, status=status, headers={"Retry-After": str(retry_after)})
        self.served.append(Served(vin, 200, time.monotonic(), key))
        return web.json_response(SPECS)

    def calls(self, vin: str) -> list[Served]:
        return [s for s in self.served if s.vin == vin]


@pytest.fixture
def service():
    """The service in a thread of its own, so sync tests (chunks in threads) and async ones can use it."""
    svc = Service()
    started = threading.Event()
    state: dict = {}

    async def serve() -> None:
        app = web.Application()
        app.router.add_get("/specs", svc.specs)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        svc.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        state["stop"] = stop = asyncio.Event()
        state["loop"] = asyncio.get_running_loop()
        started.set()
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(10)
    yield svc
    state["loop"].call_soon_threadsafe(state["stop"].set)
    thread.join(10)


def rows(*vins: str) -> list[dict]:
    return [{"vin": v} for v in vins]


async def test_a_retry_waits_in_the_queue_while_its_slot_serves_other_vins(service):
    """One slot. A answers 503 `Retry-After: 2`, B 503 `Retry-After: 1`: C, D, E are served while both wait."""
    service.script = {A: [(503, 2)], B: [(503, 1)]}
    settings = Settings(api_key="sched_key", base_url=service.url)
    result = await asyncio.wait_for(fetch_chunk(
        "specs",
        rows(A, B, C, D, E),
        calls=Calls(settings=settings, concurrency=1),
    ), 30)

    assert sorted(v for v, _, _ in result.found) == sorted([A, B, C, D, E])
    assert not result.failed and not result.pending
    order = [(s.vin, s.status) for s in service.served]
    # The slot went on to the other VINs; each retry came once its own wait was over (B's is shorter).
    assert order == [(A, 503), (B, 503), (C, 200), (D, 200), (E, 200), (B, 200), (A, 200)], order
    for vin, wait in ((A, 2), (B, 1)):
        first, retry = service.calls(vin)
        assert retry.at - first.at >= wait, (vin, retry.at - first.at)  # never before its not-before
        assert first.key and retry.key == first.key  # the same call: one Idempotency-Key
    # Every attempt is counted, numbered across the queue.
    attempts = sorted((record.vin, record.attempt, record.status) for _, record, _, _ in result.calls)
    assert attempts == sorted([(A, 1, 503), (A, 2, 200), (B, 1, 503), (B, 2, 200), (C, 1, 200), (D, 1, 200),
                               (E, 1, 200)])


async def test_the_retry_budget_still_holds_across_the_queue(service):
    service.script = {A: [(503, 0)] * 10}
    settings = Settings(api_key="sched_key", base_url=service.url)
    result = await asyncio.wait_for(fetch_chunk("specs", rows(A, B), calls=Calls(settings=settings, concurrency=2)), 30)
    assert [(f["vin"], f["status"], f["attempts"]) for f in result.failed] == [(A, 503, 1 + settings.retry.max_retries)]
    assert len(service.calls(A)) == 1 + settings.retry.max_retries


async def test_a_stop_ends_a_waiting_retry_at_once_and_leaves_it_pending(service):
    """A waits out `Retry-After: 60`; the key is stopped meanwhile (as cancellation does): A is pending."""
    service.script = {A: [(503, 60)]}
    settings = Settings(api_key="sched_key", base_url=service.url)
    stops = Stops()
    refusal = e.error_from_response(401, {"success": False, "message": "cancelled"})
    timer = threading.Timer(0.5, stops.refuse, ("specs", refusal))  # from another thread, like a signal handler
    timer.start()
    try:
        # Bounded well under the 60 s an unnoticed stop would sleep.
        result = await asyncio.wait_for(fetch_chunk(
            "specs",
            rows(A, B, C),
            calls=Calls(settings=settings, concurrency=2, stops=stops),
        ), 10)
    finally:
        timer.cancel()
    assert result.pending == [A] and result.stop_reason == "401 cancelled"
    assert sorted(v for v, _, _ in result.found) == [B, C]
    assert [s.status for s in service.calls(A)] == [503]


def test_a_chunk_hands_its_waiting_retries_to_the_next_chunk_of_its_dataset(service):
    """Chunk 1 has only a waiting retry left while chunk 2 waits for its turn: chunk 2 takes it over."""
    service.script = {A: [(503, 3)]}
    settings = Settings(api_key="sched_key", base_url=service.url)
    results: dict[int, object] = {}
    inside = threading.Event()

    def chunk(n: int, vins: tuple[str, ...]) -> None:
        with fetch_turn("run-handoff", "specs") as lane:
            inside.set()
            results[n] = asyncio.run(fetch_chunk(
                "specs",
                rows(*vins),
                calls=Calls(settings=settings, concurrency=2),
                lane=lane,
            ))

    first = threading.Thread(target=chunk, args=(1, (A, B)))
    first.start()
    assert inside.wait(10)
    second = threading.Thread(target=chunk, args=(2, (C, D)))
    second.start()
    first.join(30)
    second.join(30)
    forget_run("run-handoff")
    one, two = results[1], results[2]
    assert one.handed_off == [A] and [v for v, _, _ in one.found] == [B]  # type: ignore[attr-defined]
    assert sorted(v for v, _, _ in two.found) == [A, C, D] and not two.pending  # type: ignore[attr-defined]
    order = [(s.vin, s.status) for s in service.served]
    assert order.index((C, 200)) < order.index((A, 200)) and order.index((D, 200)) < order.index((A, 200))
    first_call, retry = service.calls(A)
    assert retry.key == first_call.key and retry.at - first_call.at >= 3
    # Each chunk counts the attempts it made: A's first in chunk 1, its second (attempt 2) in chunk 2.
    assert [(r.vin, r.attempt) for _, r, _, _ in one.calls if r.vin == A] == [(A, 1)]  # type: ignore[attr-defined]
    assert [(r.vin, r.attempt) for _, r, _, _ in two.calls if r.vin == A] == [(A, 2)]  # type: ignore[attr-defined]


async def test_an_endpoint_answering_mostly_5xx_is_paused_and_its_vins_left_pending():
    """Every call answers 503 (`Retry-After: 1`): after a sustained window the endpoint is paused.

    The thresholds are shortened for the test (a 1 s window instead of 60 s); the rule is the same.
    """
    vins = [f"1HGCM8263{i % 10}A{i:06d}" for i in range(30)]
    stops = Stops(pause=PausePolicy(window=1.0, share=0.8, min_calls=10))
    with run_sandbox(SandboxConfig(faults=FaultConfig(rate=1.0, statuses=[503], retry_after_seconds=1))) as sandbox:
        settings = Settings(api_key="pause_key", base_url=sandbox.url)
        result = await asyncio.wait_for(fetch_chunk(
            "specs",
            rows(*vins),
            calls=Calls(settings=settings, concurrency=8, stops=stops),
        ), 30)
        assert sorted(result.pending) == sorted(vins) and not result.found and not result.failed
        assert result.stop_reason and result.stop_reason.startswith("paused: 5xx on "), result.stop_reason
        assert result.stop_reason.endswith("for 1s")
        served = sandbox.count("/specs")
        assert served < len(vins) * (1 + settings.retry.max_retries)  # no VIN went through its whole budget
        assert len(result.calls) == served  # every attempt made is counted

        # The rest of the run calls that endpoint no more; other endpoints go on.
        later = await fetch_chunk("specs", rows(*vins[:5]), calls=Calls(settings=settings, stops=stops))
        assert later.pending == vins[:5] and later.stop_reason == result.stop_reason
        assert sandbox.count("/specs") == served
        sandbox.set_faults(FaultConfig())
        history = await fetch_chunk("history", rows("1HGCM82633A004352"), calls=Calls(settings=settings, stops=stops))
        assert history.found and not history.pending


def test_the_pause_rule_needs_a_sustained_window_and_enough_calls():
    now = [0.0]
    stops = Stops(pause=PausePolicy(window=60.0, share=0.8, min_calls=20), clock=lambda: now[0])
    for _ in range(50):  # a burst of failures at the start is not yet a sustained window
        stops.observe("specs", 503)
    assert stops.reason("specs", endpoint="specs") is None
    now[0] = 30.0
    for status in [200] * 10 + [503] * 10:
        stops.observe("specs", status)
    assert stops.reason("specs", endpoint="specs") is None  # 60 s not yet watched
    now[0] = 61.0  # the burst has left the window: 20 answers, half failing
    stops.observe("specs", 200)
    assert stops.reason("specs", endpoint="specs") is None
    now[0] = 75.0
    for status in [None] * 40:  # no answer at all counts as failing too
        stops.observe("specs", status)
    reason = stops.reason("specs", endpoint="specs")
    assert reason == "paused: 5xx on 80% of 55 calls for 60s", reason  # paused at 44 failing of 55
    assert stops.reason("specs") is None and stops.reason("history", endpoint="history") is None


async def test_recall_campaign_lookups_run_concurrently(store):
    """Several models' campaign lists: the sandbox has more than one of them in flight at once."""
    models = ["Odyssey", "Accord", "CR-V", "Insight"]
    vins = {m: [f"1HGCM826{i}{j}JA000{i}{j}" for j in range(2)] for i, m in enumerate(models)}
    everyone = [v for pair in vins.values() for v in pair]
    store.land("vehicles", pl.DataFrame({"vin": everyone, "unit_number": everyone}), "r1")
    store.land("specs", pl.DataFrame({"vin": everyone, "year": [2018] * 8, "make": ["Honda"] * 8,
                                      "model": [m for m in models for _ in range(2)], "fetched_at": [CHECKED] * 8}), "r1")
    store.land("recall_checks", pl.DataFrame([
        {"vin": v, "checked_via": "batch", "batch_id": "b1", "has_recalls": True,
         "recall_count": len(campaign_pool(2018, "Honda", m)), "fetched_at": CHECKED}
        for m, pair in vins.items() for v in pair]), "r1")
    with run_sandbox(SandboxConfig(faults=FaultConfig(latency_ms=200))) as sandbox:
        settings = Settings(api_key="details_key", base_url=sandbox.url)
        outcome = await asyncio.wait_for(fetch_recall_details(
            store,
            "r1",
            calls=Calls(settings=settings),
            match="model",
        ), 30)
        stats = sandbox.stats()
        assert sandbox.count("/v1/recalls-ymm") == len(models) and sandbox.count("/v1/recalls") == 0
    assert outcome.by_model == len(everyone)
    assert stats["peak_in_flight"] > 1, stats  # one listing at a time before


# --- the retry window: once the run has made every first attempt it can, retries get W more --------


def test_the_retry_window_opens_once_every_first_attempt_is_made_and_new_work_reopens_it():
    """Opens when no first attempt is left; closes W later. New work re-opens it; work that follows does not."""
    from fleet_data.tasks.control.retry_window import WINDOW_CLOSED, RetryWindow

    now = [0.0]
    window = RetryWindow(10.0, clock=lambda: now[0])
    assert window.reason() is None  # nothing asked yet: not open
    window.expect(3)
    window.made(2)
    now[0] = 50.0
    assert window.reason() is None and window.closes_at() is None  # a first attempt is still to be made
    window.made(1)  # opens at 50
    assert window.closes_at() == 60.0
    now[0] = 59.9
    assert window.reason() is None
    now[0] = 60.0
    assert window.reason() == WINDOW_CLOSED == "retry window closed"
    window.expect(2)  # a new chunk's VINs: the run has first attempts to make again
    assert window.reason() is None and window.closes_at() is None
    now[0] = 70.0
    window.made(2)
    assert window.closes_at() == 80.0
    # Jobs that follow from other calls' answers (recall details after the batch's results) get first
    # attempts, but do not push the close further out.
    now[0] = 75.0
    window.expect(4, follows=True)
    window.made(4)
    assert window.closes_at() == 80.0
    assert RetryWindow(None, clock=lambda: now[0]).closes_at() is None  # no window: retries until their budget


async def test_retries_still_waiting_when_the_window_closes_end_pending_not_failed(service):
    """A window of 1.5 s. A answers 503 `Retry-After: 1`, then 503 `Retry-After: 5`; B 503 `Retry-After: 1`, then 200.

    B's retry fits in the window and lands; A's second retry would come after it closes: A ends pending,
    with the reason, after one retry that honoured its Retry-After; nothing is failed.
    """
    from fleet_data.tasks.control.retry_window import WINDOW_CLOSED, RetryWindow

    service.script = {A: [(503, 1), (503, 5)], B: [(503, 1)]}
    settings = Settings(api_key="sched_key", base_url=service.url)
    stops = Stops(window=RetryWindow(1.5))
    result = await asyncio.wait_for(fetch_chunk(
        "specs",
        rows(A, B, C),
        calls=Calls(settings=settings, concurrency=2, stops=stops),
    ), 10)  # bound: without the window, A waits 5 s more
    assert sorted(v for v, _, _ in result.found) == [B, C]
    assert result.pending == [A] and result.stop_reason == WINDOW_CLOSED and not result.failed
    first, retry = service.calls(A)
    assert retry.at - first.at >= 1 and retry.key == first.key  # the spec's Retry-After still honoured
    # The run goes on: a later chunk's VINs are first attempts, and re-open the window for their retries.
    service.script = {D: [(503, 1)]}
    later = await asyncio.wait_for(fetch_chunk("specs", rows(D, E), calls=Calls(settings=settings, stops=stops)), 10)
    assert sorted(v for v, _, _ in later.found) == [D, E] and not later.pending


async def test_late_first_attempts_that_follow_get_only_what_is_left_of_the_window(service):
    """Recall details come after the batch's results: made even when late, their retries bounded by the same close."""
    from fleet_data.tasks.control.retry_window import WINDOW_CLOSED, RetryWindow

    stops = Stops(window=RetryWindow(1.0))
    stops.window.expect(1)
    stops.window.made(1)  # the other datasets made every first attempt: the window is open
    service.script = {A: [(503, 2)]}
    settings = Settings(api_key="sched_key", base_url=service.url)
    result = await asyncio.wait_for(fetch_chunk(
        "specs",
        rows(A, B),
        calls=Calls(settings=settings, stops=stops),
        follows=True,
    ), 10)
    assert [v for v, _, _ in result.found] == [B]  # a first attempt, though late
    assert result.pending == [A] and result.stop_reason == WINDOW_CLOSED
    assert [s.status for s in service.calls(A)] == [503]


async def test_a_wait_in_place_ends_when_the_window_closes(service):
    """Outside the scheduler (recall batch steps call through `Stops.call`), a retry's wait ends at the close too."""
    from fleet_data.connectors import AsyncVehicleDataClient
    from fleet_data.tasks.control.retry_window import WINDOW_CLOSED, RetryWindow
    from fleet_data.tasks.control.stops import Stopped

    stops = Stops(window=RetryWindow(0.5))
    stops.window.expect(1)
    stops.window.made(1)
    service.script = {A: [(503, 60)]}
    settings = Settings(api_key="sched_key", base_url=service.url)
    async with AsyncVehicleDataClient(settings) as client:
        with pytest.raises(Stopped) as stopped:
            await asyncio.wait_for(stops.call("specs", lambda: client.specs(A), lambda leave: None), 10)
    assert stopped.value.reason == WINDOW_CLOSED
    assert [s.status for s in service.calls(A)] == [503]


def test_the_default_window_holds_a_call_whose_every_retry_waits_out_the_specs_retry_after():
    """A call's first attempt comes before the window opens, so its retries have at least the whole window:
    with the defaults, a call answered 503 `Retry-After: 60` every time spends its retries and ends failed
    (with the service's reason), instead of pending run after run."""
    from fleet_data.connectors import RetryPolicy
    from fleet_data.tasks.control.retry_window import DEFAULT_SECONDS

    spec_retry_after = 60.0
    assert RetryPolicy().max_retries * spec_retry_after <= DEFAULT_SECONDS
    assert RetryPolicy().max_retries >= 2  # "a call may rightly wait out two or three 60 s Retry-Afters"
