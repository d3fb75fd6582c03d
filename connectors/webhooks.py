"""Receiving the service's recalls-batch webhook, so a caller can wait instead of polling.

The payload is our design (README, "Where the spec is silent"): `{event, batchId, status, ...}`.
The receiver listens on a local address; in production it sits behind the HTTPS URL given to
the service as `webhookUrl`. Unknown batches and bad bodies are answered and ignored.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web

log = logging.getLogger("connectors.webhooks")
PATH = "/recalls-batch"


class BatchWebhookReceiver:
    """`async with BatchWebhookReceiver("127.0.0.1", 0) as hooks: await hooks.wait(batch_id, 60)`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self._events: dict[str, asyncio.Event] = {}
        self.received: list[dict[str, Any]] = []
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{PATH}"

    async def __aenter__(self) -> "BatchWebhookReceiver":
        app = web.Application()
        app.router.add_post(PATH, self._receive)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # the bound port when 0 was asked
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _receive(self, request: web.Request) -> web.Response:
        try:
            payload = await request.json()
            batch_id = str(payload["batchId"])
        except (ValueError, KeyError, TypeError):
            return web.Response(status=400, text="expected a JSON body with batchId")
        self.received.append(payload)
        log.debug("webhook for batch %s: %s", batch_id, payload.get("status"))
        self._event(batch_id).set()
        return web.Response(status=204)

    def _event(self, batch_id: str) -> asyncio.Event:
        return self._events.setdefault(batch_id, asyncio.Event())

    async def wait(self, batch_id: str, timeout: float) -> bool:
        """True when the batch's webhook arrived (now or earlier), False after `timeout` seconds."""
        try:
            await asyncio.wait_for(self._event(batch_id).wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False
