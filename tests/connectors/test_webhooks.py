"""The batch webhook receiver: a real loopback socket, the sandbox's payload shape, and forgeries.

The receiver is an open port: it must accept a delivery only with this run's secret token, only for
a batch the run is waiting for, only in the documented shape and size, wake its waiter once per
delivery (at most once per `min_interval`), and keep no state for what it refuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qs, urlsplit

import httpx
import psutil
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


# A listener as `--webhook-listen` runs it, in a process of its own so its stderr and memory can be measured:
# logging as `fleet` sets it up (warnings to stderr), waiting for one batch, saying "woke" when delivered.
LISTENER = """
import asyncio, logging, sys
from fleet_data.connectors.webhooks import BatchWebhookReceiver
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

async def main():
    async with BatchWebhookReceiver("127.0.0.1", 0) as hooks:
        hooks.expect("rb_1")
        print(hooks.notify_url(), flush=True)
        woke = await hooks.wait("rb_1", 600)
        print("woke" if woke else "timed out", flush=True)

asyncio.run(main())
"""


def _garbage(n: int) -> bytes:
    """A malformed request of a few kinds, most of them quoting the sender's bytes in aiohttp's error."""
    kind = n % 5
    if kind == 0:  # a good request, then junk on the same connection: aiohttp logs that one with a traceback
        return b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n" + b"\x16\x03\x01" + bytes(range(256)) * 200
    if kind == 1:  # an oversize header
        return b"POST /recalls-batch HTTP/1.1\r\nHost: a\r\nX-Junk: " + b"A" * 70_000 + b"\r\n\r\n"
    if kind == 2:  # a bad header value
        return b"POST /recalls-batch HTTP/1.1\r\nHost: a\r\nContent-Length: lots\r\n\r\n"
    if kind == 3:  # a bad version, and control bytes in the target
        return b"GET /\x00\x01\x02" + b"B" * 5000 + b" HTTP/9.9\r\n\r\n"
    return b"POST /recalls-batch HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + b"C" * 60_000


def _send(port: int, payload: bytes) -> None:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(5)
        while s.recv(65536):
            pass


def test_a_flood_of_malformed_requests_is_one_short_line_each_at_most_and_memory_stays_flat(tmp_path):
    stderr = tmp_path / "listener.err"
    with stderr.open("wb") as err:
        listener = subprocess.Popen([sys.executable, "-c", LISTENER], stdout=subprocess.PIPE, stderr=err)
    try:
        notify_url = listener.stdout.readline().decode().strip()
        port = urlsplit(notify_url).port
        process = psutil.Process(listener.pid)
        for n in range(200):  # warm up: the first of each kind allocates what later ones reuse
            _send(port, _garbage(n))
        before = process.memory_info().rss
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: _send(port, _garbage(n)), range(3000)))
        grown = process.memory_info().rss - before
        # ...and the listener still serves a valid delivery afterwards.
        answer = httpx.post(notify_url, json=delivery(), timeout=30)
        assert answer.status_code == 204
        assert listener.stdout.readline().decode().strip() == "woke"
        listener.wait(timeout=30)
    finally:
        listener.kill()
        listener.wait(timeout=10)
    text = stderr.read_bytes()
    assert len(text) < 100_000, f"{len(text):,} bytes of stderr for 3,200 bad requests: {text[:2000]!r}"
    assert b"Traceback" not in text
    assert grown < 50_000_000, f"RSS grew {grown:,} bytes"  # generous: the flood must not be kept


async def test_a_malformed_request_quoting_the_token_is_logged_without_it(caplog):
    async with BatchWebhookReceiver("127.0.0.1", 0) as hooks:
        query = urlsplit(hooks.notify_url()).query
        token = parse_qs(query)["token"][0]
        reader, writer = await asyncio.open_connection("127.0.0.1", hooks.port)
        writer.write(f"GET /recalls-batch?{query}\x00 HTTP/1.1\r\nHost: a\r\n\r\n".encode())
        await writer.drain()
        await reader.read()  # aiohttp answers 400 and closes
        writer.close()
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("connectors.webhooks")]
    assert len(lines) == 1 and "InvalidURLError" in lines[0] and "\n" not in lines[0]
    assert token not in caplog.text and hooks.refused["malformed"] == 1
