"""A run's stops: scopes of refusals, one probing call per unproven key or API, shared across threads."""

from __future__ import annotations

import asyncio
import threading

from fleet_data.connectors import errors as e
from fleet_data.tasks.control.stops import Stopped, Stops, for_run, forget_run


def refusal(status: int, message: str, **body) -> e.APIStatusError:
    return e.error_from_response(status, {"success": False, "message": message, **body})


def test_key_refusals_stop_every_api_and_api_refusals_only_their_own():
    stops = Stops()
    stops.refuse("history", refusal(403, "Your plan does not include the History API. Upgrade..."))
    stops.refuse("specs", refusal(429, "You have exceeded the monthly quota of the Specs API"))
    assert stops.reason("history").startswith("403") and stops.reason("specs").startswith("429")
    assert stops.reason("market_value") is None
    stops.refuse("market_value", refusal(402, "Insufficient prepaid credits", code="insufficient_credits"))
    assert all(stops.reason(api).startswith("402") for api in ("market_value", "lien_theft", "recalls"))
    for message, status in (("User with this API key was not found or the API key is disabled", 401),
                            ("This API key has been blocked, please contact support", 403)):
        one = Stops()
        assert one.refuse("specs", refusal(status, message)).startswith(str(status))
        assert one.reason("recalls") == one.reason("specs")  # the key: every API


def test_until_the_key_is_proven_one_call_goes_out_and_a_refusal_stops_the_waiting_ones():
    stops = Stops()
    seen: list[str] = []

    async def call(api: str) -> None:
        leave = await stops.admit(api)
        seen.append(leave.stopped or f"admitted {api}")
        if not leave.stopped:
            await asyncio.sleep(0.05)
            stops.refuse(api, refusal(401, "User with this API key was not found or the API key is disabled"))
            leave.release()

    async def many(api: str) -> None:
        await asyncio.gather(*(call(api) for _ in range(5)))

    threads = [threading.Thread(target=asyncio.run, args=(many(api),)) for api in ("specs", "history", "recalls")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(seen) == 15 and sum(s.startswith("admitted") for s in seen) == 1  # one call, 14 never started
    assert all(s.startswith("401") for s in seen if not s.startswith("admitted"))


def test_an_answer_without_a_verdict_lets_the_next_call_probe_and_a_good_one_opens_the_api():
    async def scenario() -> list[str]:
        stops = Stops()
        first = await stops.admit("specs")
        waiting = asyncio.ensure_future(stops.admit("specs"))
        await asyncio.sleep(0.01)
        assert not waiting.done()  # one unproven call at a time
        first.answered(503)  # the first call backs off before retrying: the next one may try
        second = await asyncio.wait_for(waiting, 1)
        third = asyncio.ensure_future(stops.admit("specs"))
        await asyncio.sleep(0.01)
        assert not third.done()
        second.answered(200)  # accepted: the key and the API are proven, everyone goes
        await asyncio.wait_for(third, 1)
        others = await asyncio.wait_for(asyncio.gather(*(stops.admit("specs") for _ in range(10))), 1)
        first.release()
        second.release()
        # Another API is still unproven: one call to it at a time, even with the key proven.
        history = await stops.admit("history")
        blocked = asyncio.ensure_future(stops.admit("history"))
        await asyncio.sleep(0.01)
        assert not blocked.done()
        stops.refuse("history", refusal(403, "Your plan does not include the History API."))
        history.release()
        return [(await blocked).stopped or "", *(o.stopped or "ok" for o in others)]

    outcome = asyncio.run(scenario())
    assert outcome[0].startswith("403") and outcome[1:] == ["ok"] * 10


def test_stops_call_raises_stopped_and_runs_are_separate():
    stops = for_run("run-x")
    stops.refuse("specs", refusal(429, "You have exceeded the monthly quota of the Specs API"))
    try:
        asyncio.run(stops.call("specs", lambda: asyncio.sleep(0), lambda leave: None))
        raise AssertionError("a stopped API was called")
    except Stopped as exc:
        assert exc.reason.startswith("429")
    assert for_run("run-y").reason("specs") is None
    forget_run("run-x")
    forget_run("run-y")
    assert for_run("run-x").reason("specs") is None
    forget_run("run-x")
