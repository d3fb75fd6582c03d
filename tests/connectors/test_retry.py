"""The retry policy makes exactly the attempts the spec allows, and waits as the server asks."""

from __future__ import annotations

import httpx
import pytest

from fleet_data.connectors import RetryPolicy
from fleet_data.connectors import errors as e

from .conftest import reply

VIN = "1HGCM82633A004352"
POLICY = RetryPolicy(max_retries=4, max_500_retries=1, initial_backoff=0.5, max_backoff=8.0, max_retry_after=60.0)


def fail(status: int, **extra) -> httpx.Response:
    return reply(status, {"success": False, "message": extra.pop("message", f"failure {status}"), **extra})


@pytest.mark.parametrize(
    ("answer", "attempts"),
    [
        (fail(502, retryable=True), 5),  # 1 + max_retries
        (fail(503, retryable=True), 5),
        (fail(504, retryable=True), 5),
        (fail(500), 2),  # "once with backoff"
        (fail(500, message="Unable to authenticate internal request (code CV-001). Please try again later"), 1),
        (fail(500, message="Unable to authenticate internal request (code CV-002). Please try again later"), 1),
        (fail(400), 1),
        (fail(401), 1),
        (fail(402, code="insufficient_credits"), 1),
        (fail(403), 1),
        (fail(404), 1),
        (fail(405), 1),
        (fail(409, message="Batch processing is not yet complete."), 1),
        (fail(429, usage={"current": 5, "limit": 5, "remaining": 0}), 1),
        (fail(500, message="Please supply a make and model"), 1),  # legacy validation, not a server fault
    ],
    ids=lambda v: str(getattr(v, "status_code", v)),
)
async def test_attempts_per_status(scripted, answer, attempts):
    h = scripted(answer, policy=POLICY)
    with pytest.raises(e.APIStatusError):
        await h.client.specs(VIN)
    assert h.attempts == attempts
    assert len(h.sleeps) == attempts - 1
    assert [c.attempt for c in h.calls] == list(range(1, attempts + 1))
    assert [c.will_retry for c in h.calls] == [True] * (attempts - 1) + [False]


async def test_transient_failure_then_success_returns_the_result(scripted):
    ok = reply(200, {"success": True, "input": {"vin": VIN}, "attributes": {"year": "2019", "make": "Honda"}})
    h = scripted(fail(503, retryable=True), httpx.ConnectError("refused"), ok, policy=POLICY)
    result = await h.client.specs(VIN)
    assert result.attributes.year == 2019
    assert h.attempts == 3
    assert [c.status for c in h.calls] == [503, None, 200]
    assert [c.units for c in h.calls] == [0, 0, 1]  # only the answered call costs (a refused one never left)
    assert not any(c.unknown for c in h.calls)


async def test_a_call_sent_and_never_answered_may_have_cost_what_the_spec_prices_it(scripted):
    """A read timeout or a dropped connection: the request left, the service may have billed it. The client says
    so before sending (`on_send`, with the call's id) and after (`unknown`, with what it may have cost)."""
    ok = reply(200, {"success": True, "input": {"vin": VIN}, "attributes": {"year": "2019", "make": "Honda"}})
    h = scripted(httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("dropped"), ok, policy=POLICY)
    sent = []
    h.client._on_send = sent.append
    await h.client.specs(VIN)
    assert [(c.status, c.units, c.unknown) for c in h.calls] == [(None, 1, True), (None, 1, True), (200, 1, False)]
    assert [i.call_id for i in sent] == [c.call_id for c in h.calls] and len(set(i.call_id for i in sent)) == 3
    assert [(i.endpoint, i.vin, i.attempt, i.units) for i in sent] == [("specs", VIN, n, 1) for n in (1, 2, 3)]


@pytest.mark.parametrize("exc", [httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("dropped")])
async def test_network_failures_are_retried_then_raised(scripted, exc):
    h = scripted(exc, policy=POLICY)
    with pytest.raises(e.APIConnectionError):
        await h.client.specs(VIN)
    assert h.attempts == 5


async def test_timeout_is_its_own_error(scripted):
    h = scripted(httpx.ReadTimeout("slow"), policy=POLICY)
    with pytest.raises(e.APITimeoutError):
        await h.client.specs(VIN)


async def test_malformed_json_is_retried(scripted):
    good = reply(200, {"success": True, "attributes": {"make": "Ford"}})
    h = scripted(reply(200, b'{"success": true, "attri'), good, policy=POLICY)
    result = await h.client.specs(VIN)
    assert result.attributes.make == "Ford"
    assert h.attempts == 2


async def test_retry_after_is_honoured(scripted):
    h = scripted(fail(503, retryable=True), fail(502, retryable=True), reply(200), policy=POLICY)
    h.script.answers[0].headers["Retry-After"] = "7"
    h.script.answers[1].headers["Retry-After"] = "120"
    await h.client.history(VIN)
    assert h.sleeps == [7.0, 60.0]  # the second is capped by max_retry_after


async def test_absent_retry_after_backs_off_exponentially_with_jitter(scripted):
    h = scripted(fail(502, retryable=True), policy=POLICY)
    with pytest.raises(e.BadGatewayError):
        await h.client.history(VIN)
    ceilings = [0.5, 1.0, 2.0, 4.0]
    assert len(h.sleeps) == 4
    for slept, ceiling in zip(h.sleeps, ceilings):
        assert ceiling / 2 <= slept <= ceiling


async def test_post_is_retried_with_the_same_idempotency_key(scripted):
    accepted = reply(202, {"success": True, "data": {"batchId": "rb_1", "status": "uploading", "totalVins": 1, "processedVins": 0}})
    h = scripted(fail(503, code="auto_recharge_pending"), fail(500), accepted, policy=POLICY)
    job = await h.client.submit_recalls_batch([VIN])
    assert job.batchId == "rb_1"
    keys = [r.headers["Idempotency-Key"] for r in h.script.requests]
    assert len(keys) == 3 and len(set(keys)) == 1
    assert h.calls[-1].units == 1


async def test_caller_supplied_idempotency_key_is_sent(scripted):
    accepted = reply(202, {"success": True, "data": {"batchId": "rb_2", "status": "uploading", "totalVins": 2}})
    h = scripted(accepted)
    await h.client.submit_recalls_batch([VIN, VIN], idempotency_key="ledger-key-1")
    assert h.script.requests[0].headers["Idempotency-Key"] == "ledger-key-1"


def test_post_without_idempotency_key_is_never_retried():
    err = e.ServiceUnavailableError("x", status=503)
    assert not POLICY.should_retry(err, retries={}, method="POST", idempotent=False)
    assert POLICY.should_retry(err, retries={}, method="POST", idempotent=True)
    assert not POLICY.should_retry(err, retries={"transient": 4}, method="POST", idempotent=True)


async def test_auth_chosen_per_call(scripted):
    status = reply(200, {"success": True, "data": {"batchId": "rb_3", "status": "processing"}})
    h = scripted(status, status)
    await h.client.recalls_batch_status("rb_3", batch_token="tok_abc")
    await h.client.recalls_batch_status("rb_3")
    with_token, with_key = h.script.requests
    assert with_token.headers["X-Service-Batch-Token"] == "tok_abc" and "key" not in with_token.url.params
    assert "X-Service-Batch-Token" not in with_key.headers and with_key.url.params["key"]


@pytest.mark.parametrize("call", ["specs", "batch_status"])
async def test_valid_json_of_the_wrong_shape_is_malformed_not_retried_and_names_no_value(scripted, call):
    # The service answered (and may have billed): asking again would return the same shape.
    wrong = {"success": True, "attributes": ["PERSONAL-VALUE"], "data": {"status": ["PERSONAL-VALUE"]}}
    h = scripted(reply(200, wrong), policy=POLICY)
    with pytest.raises(e.MalformedResponseError) as raised:
        if call == "specs":
            await h.client.specs(VIN)
        else:
            await h.client.recalls_batch_status("b-1")
    assert h.attempts == 1
    assert raised.value.status == 200 and "does not match its schema" in str(raised.value)
    assert "PERSONAL-VALUE" not in str(raised.value)


async def test_auto_recharge_pending_get_is_retried_with_one_stable_idempotency_key(scripted):
    # The spec: "retry with backoff using the same idempotency key and do not start a second payment".
    # A GET must carry the key from its first attempt, or its retries cannot be "the same" request.
    pending = fail(503, code="auto_recharge_pending", retryable=True)
    ok = reply(200, {"success": True, "attributes": {"make": "Honda"}})
    h = scripted(pending, pending, ok, policy=POLICY)
    result = await h.client.specs(VIN)
    assert result.attributes.make == "Honda"
    assert [r.method for r in h.script.requests] == ["GET", "GET", "GET"]
    keys = [r.headers.get("Idempotency-Key") for r in h.script.requests]
    assert keys[0] and len(set(keys)) == 1
    assert [c.status for c in h.calls] == [503, 503, 200]


async def test_every_call_gets_its_own_idempotency_key(scripted):
    h = scripted(reply(200, {"success": True, "attributes": {}}))
    await h.client.specs(VIN)
    await h.client.specs(VIN)
    first, second = (r.headers.get("Idempotency-Key") for r in h.script.requests)
    assert first and second and first != second


# --- a call run by a scheduler: its retries wait in the scheduler's queue, not in the client ------------


async def test_a_scheduled_call_hands_its_wait_back_instead_of_sleeping(scripted):
    """Under `scheduled`, a retryable failure raises `RetryLater` with the server's wait; nothing sleeps.

    Sent again under the same `CallAttempts`, it is the same call: same Idempotency-Key, attempts counted
    on, the retry budget spent so far kept, so the policy's maximum holds across the queue.
    """
    from fleet_data.connectors.retry import CallAttempts, RetryLater, scheduled

    busy = fail(503, retryable=True)
    busy.headers["Retry-After"] = "60"
    ok = reply(200, {"success": True, "attributes": {"make": "Honda"}})
    h = scripted(busy, ok, policy=POLICY)
    attempts = CallAttempts()
    with scheduled(attempts), pytest.raises(RetryLater) as later:
        await h.client.specs(VIN)
    assert later.value.delay == 60.0 and isinstance(later.value.error, e.ServiceUnavailableError)
    assert h.sleeps == [] and h.attempts == 1
    with scheduled(attempts):
        result = await h.client.specs(VIN)
    assert result.attributes.make == "Honda"
    keys = [r.headers["Idempotency-Key"] for r in h.script.requests]
    assert keys[0] and keys == [keys[0]] * 2
    assert [(c.attempt, c.will_retry, c.status) for c in h.calls] == [(1, True, 503), (2, False, 200)]
    assert attempts.attempts == 2

    # The maximum: 1 + max_retries attempts, then the error itself.
    h = scripted(busy, policy=POLICY)
    attempts = CallAttempts()
    for _ in range(POLICY.max_retries):
        with scheduled(attempts), pytest.raises(RetryLater):
            await h.client.specs(VIN)
    with scheduled(attempts), pytest.raises(e.ServiceUnavailableError):
        await h.client.specs(VIN)
    assert h.attempts == 1 + POLICY.max_retries and h.sleeps == []
    assert [c.attempt for c in h.calls] == list(range(1, 2 + POLICY.max_retries))
    assert len({r.headers["Idempotency-Key"] for r in h.script.requests}) == 1
    # Two calls are two keys, whatever the scheduler.
    with scheduled(CallAttempts()), pytest.raises(RetryLater):
        await h.client.specs(VIN)
    assert h.script.requests[-1].headers["Idempotency-Key"] != keys[0]


async def test_a_wait_in_place_ends_when_its_caller_says_stop(scripted):
    """Outside a scheduler the client waits out Retry-After itself; a stop ends that wait within a step."""
    import asyncio

    from fleet_data.connectors.retry import RetryAbandoned, waits_end_when

    busy = fail(503, retryable=True)
    busy.headers["Retry-After"] = "60"
    h = scripted(busy, policy=POLICY)
    h.client._sleep = asyncio.sleep  # real waits, in steps
    reason: list[str] = []
    asyncio.get_running_loop().call_later(0.2, reason.append, "cancelled")
    with waits_end_when(lambda: reason[0] if reason else None), pytest.raises(RetryAbandoned) as abandoned:
        await asyncio.wait_for(h.client.specs(VIN), 10)  # 60 s if the stop went unnoticed
    assert abandoned.value.reason == "cancelled" and isinstance(abandoned.value.error, e.ServiceUnavailableError)
    assert h.attempts == 1


async def test_an_interrupt_ends_the_wait_for_a_retry_and_raises_what_it_would_have_retried():
    """A run being stopped must not sit out a Retry-After: the wait ends once `interrupt` says so."""
    import asyncio

    from fleet_data.connectors import AsyncVehicleDataClient, Settings

    from .conftest import Script

    stop = asyncio.Event()
    script = Script([reply(503, {"success": False, "message": "busy", "retryable": True}, headers={"Retry-After": "60"})])
    calls = []

    def observe(record):
        calls.append(record)
        asyncio.get_running_loop().call_later(0.3, stop.set)  # asked to stop while the retry waits

    settings = Settings(api_key="k", base_url="https://vds.example.test", retry=POLICY)
    async with AsyncVehicleDataClient(settings, on_call=observe, http_transport=httpx.MockTransport(script),
                                      interrupt=stop.is_set) as client:
        with pytest.raises(e.UpstreamError):
            await asyncio.wait_for(client.specs(VIN), timeout=30)  # bound: without the interrupt, 4 x 60 s
    assert len(script.requests) == 1 and calls[0].will_retry  # it meant to retry, and did not
