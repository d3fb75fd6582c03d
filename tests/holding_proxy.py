"""A reverse proxy on loopback that forwards each request to the service at once and holds its answer a while.

What a slow network does after the service has billed a call: the service has answered (and billed), the
client has not heard yet. A client killed while an answer is held has paid for a call it never saw answered,
which is what the ledger must still count. (The sandbox's own latency is no stand-in: it sleeps before
serving, and a client that hangs up meanwhile is never billed.)

    with HoldingProxy(sandbox.url, hold=(0.3, 0.5)) as proxy:
        ...point the client at proxy.url; proxy.holding is how many answers are held now
"""

from __future__ import annotations

import asyncio
import random
import threading

import aiohttp
from aiohttp import web

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}


class HoldingProxy:
    def __init__(self, target: str, hold: tuple[float, float] = (0.3, 0.5)):
        self.target, self.hold = target.rstrip("/"), hold
        self.holding = 0  # answers received from the service and not yet passed on
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="holding-proxy", daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        async with self._session.request(request.method, self.target + request.path_qs, headers=headers,
                                         data=body or None, allow_redirects=False) as answer:
            payload = await answer.read()
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}
        self.holding += 1
        try:
            await asyncio.sleep(random.uniform(*self.hold))  # billed and answered; the client waits still
        finally:
            self.holding -= 1
        return web.Response(status=answer.status, body=payload, headers=kept)

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def __enter__(self) -> "HoldingProxy":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
