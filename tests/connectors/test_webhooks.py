"""The batch webhook receiver: a real loopback socket, the sandbox's payload shape."""

from __future__ import annotations

import httpx

from connectors.webhooks import BatchWebhookReceiver


async def test_wait_returns_when_the_batch_is_notified_and_times_out_otherwise():
    async with BatchWebhookReceiver("127.0.0.1", 0) as hooks:
        assert await hooks.wait("rb_1", 0.05) is False
        async with httpx.AsyncClient() as http:
            bad = await http.post(hooks.url, content=b"not json")
            good = await http.post(hooks.url, json={"event": "recalls_batch.completed", "batchId": "rb_1",
                                                    "status": "completed"})
        assert (bad.status_code, good.status_code) == (400, 204)
        assert await hooks.wait("rb_1", 1.0) is True  # delivered before the wait began: still seen
        assert await hooks.wait("rb_2", 0.05) is False
        assert [p["batchId"] for p in hooks.received] == ["rb_1"]
