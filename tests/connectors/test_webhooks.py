"""The batch webhook receiver: a real loopback socket, the sandbox's payload shape, and forgeries.

The receiver is an open port: it must accept a delivery only with this run's secret token, only for
a batch the run is waiting for, only in the documented shape and size, wake its waiter once per
delivery (at most once per `min_interval`), and keep no state for what it refuses.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from fleet_data.connectors.redact import redact_text
from fleet_data.connectors.webhooks import MAX_BODY_BYTES, BatchWebhookReceiver


def delivery(batch_id="rb_1", **over):
    return {"event": "recalls_batch.completed", "batchId": batch_id, "numericBatchId": 7, "status": "completed",
            "totalVins": 3, "processedVins": 3, "completedAt": "2026-01-01T00:00:00Z", **over}


async def test_a_delivery_wakes_its_waiter_once_and_the_wake_up_is_reset():
    async with BatchWebhookReceiver("127.0.0.1", 0) as hooks:
        hooks.expect("rb_1")
        assert await hooks.wait("rb_1", 0.05) is False
        async with httpx.AsyncClient() as http:
            good = await http.post(hooks.notify_url(), json=delivery())
        assert good.status_code == 204
        assert await hooks.wait("rb_1", 1.0) is True  # delivered before the wait began: still seen
        assert await hooks.wait("rb_1", 0.05) is False  # one delivery, one wake-up: then it is reset
        assert await hooks.wait("rb_2", 0.05) is False


async def test_the_url_given_to_the_service_carries_a_per_run_secret_that_redaction_hides():
    async with BatchWebhookReceiver("127.0.0.1", 0) as one, BatchWebhookReceiver("127.0.0.1", 0) as two:
        token = parse_qs(urlsplit(one.notify_url()).query)["token"][0]
        assert len(token) >= 32 and token not in two.notify_url()  # generated per run
        public = one.notify_url("https://hooks.example.com/fleet?tenant=a")
        assert public.startswith("https://hooks.example.com/fleet?tenant=a&token=") and public.endswith(token)
        assert token not in one.url  # the address the run logs and stores has no token
        assert token not in redact_text(f"POST {public} failed")
        record = logging.LogRecord("connectors", logging.WARNING, __file__, 1, "to %s", (public,), None)
        for f in logging.getLogger("connectors").filters:
            f.filter(record)
        assert token not in record.getMessage()


@pytest.mark.parametrize("url_of", [
    lambda hooks: hooks.url,  # no token
    lambda hooks: hooks.url + "?token=wrong",
    lambda hooks: hooks.notify_url()[:-1] + ("A" if not hooks.notify_url().endswith("A") else "B"),
])
async def test_a_delivery_without_the_token_marks_nothing(url_of):
    async with BatchWebhookReceiver("127.0.0.1", 0) as hooks:
        hooks.expect("rb_1")
        async with httpx.AsyncClient() as http:
            answer = await http.post(url_of(hooks), json=delivery())
        assert answer.status_code == 403
        assert await hooks.wait("rb_1", 0.05) is False


@pytest.mark.parametrize("body", [
    b"not json",
    b"[]",
    b'{"event": "recalls_batch.completed"}',
    b'{"event": "recalls_batch.completed", "batchId": ["rb_1"], "status": "completed"}',
    b'{"event": "recalls_batch.completed", "batchId": {"id": "rb_1"}, "status": "completed"}',
    b'{"event": "recalls_batch.completed", "batchId": 12, "status": "completed"}',
    b'{"event": "something.else", "batchId": "rb_1", "status": "completed"}',
    b'{"event": "recalls_batch.completed", "batchId": "rb_1", "status": ["completed"]}',
    b'{"event": "recalls_batch.completed", "batchId": "rb_1", "status": "completed", "totalVins": "3"}',
    b'{"event": "recalls_batch.completed", "batchId": "rb_1", "status": "completed", "processedVins": true}',
])
async def test_a_delivery_in_another_shape_is_refused(body):
    async with BatchWebhookReceiver("127.0.0.1", 0) as hooks:
        hooks.expect("rb_1")
        async with httpx.AsyncClient() as http:
            answer = await http.post(hooks.notify_url(), content=body, headers={"content-type": "application/json"})
        assert answer.status_code == 400
        assert await hooks.wait("rb_1", 0.05) is False


async def test_a_delivery_for_a_batch_this_run_does_not_wait_for_marks_nothing_and_leaves_no_state():
    async with BatchWebhookReceiver("127.0.0.1", 0) as hooks:
        hooks.expect("rb_1")
        async with httpx.AsyncClient() as http:
            answers = [await http.post(hooks.notify_url(), json=delivery(f"rb_forged_{i}")) for i in range(300)]
        assert {a.status_code for a in answers} == {404}
        assert hooks.waiting == {"rb_1"}
        assert await hooks.wait("rb_1", 0.05) is False
        hooks.forget("rb_1")
        assert hooks.waiting == set()


async def test_a_large_body_is_refused_before_it_is_read():
    big = b'{"event": "recalls_batch.completed", "batchId": "rb_1", "status": "completed", "pad": "' + b"x" * 1_000_000 + b'"}'
    assert len(big) > MAX_BODY_BYTES

    async def chunks():
        for start in range(0, len(big), 65536):
            yield big[start:start + 65536]

    async with BatchWebhookReceiver("127.0.0.1", 0) as hooks:
        hooks.expect("rb_1")
        async with httpx.AsyncClient() as http:
            statuses = []
            for content in (big, chunks()):  # with a Content-Length, and chunked without one
                try:
                    statuses.append((await http.post(hooks.notify_url(), content=content)).status_code)
                except httpx.TransportError:  # the receiver may close the connection before the upload ends
                    statuses.append("closed")
        assert all(s in (413, "closed") for s in statuses), statuses
        assert await hooks.wait("rb_1", 0.05) is False
        assert list(hooks.received) == []


async def test_repeated_deliveries_wake_the_waiter_at_most_once_per_interval():
    async with BatchWebhookReceiver("127.0.0.1", 0, min_interval=3600) as hooks:
        hooks.expect("rb_1")
        async with httpx.AsyncClient() as http:
            await http.post(hooks.notify_url(), json=delivery())
            assert await hooks.wait("rb_1", 1.0) is True
            for _ in range(50):
                assert (await http.post(hooks.notify_url(), json=delivery())).status_code == 204
        # Genuine-looking repeats within the interval: no wake-up before the caller's own fallback.
        assert await hooks.wait("rb_1", 0.2) is False
    async with BatchWebhookReceiver("127.0.0.1", 0, min_interval=0.05) as hooks:
        hooks.expect("rb_1")
        async with httpx.AsyncClient() as http:
            await http.post(hooks.notify_url(), json=delivery())
            assert await hooks.wait("rb_1", 1.0) is True
            await http.post(hooks.notify_url(), json=delivery())
            assert await hooks.wait("rb_1", 1.0) is True  # after the interval, a new delivery wakes it again


async def test_memory_stays_bounded_whatever_is_posted():
    async with BatchWebhookReceiver("127.0.0.1", 0) as hooks:
        hooks.expect("rb_1")
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=8)) as http:
            async def post(i: int) -> None:
                await http.post(hooks.notify_url(), json=delivery("rb_1" if i % 2 else f"rb_{i}", pad="y" * 4000))

            for start in range(0, 2000, 100):
                await asyncio.gather(*(post(i) for i in range(start, start + 100)))
        assert hooks.waiting == {"rb_1"}
        assert len(hooks.received) <= hooks.received.maxlen
        assert all(set(r) == {"batchId", "status"} for r in hooks.received)  # a summary, not the body
