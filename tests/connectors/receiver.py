"""A webhook receiver for tests: aiohttp on 127.0.0.1 in a thread, answering from a script, recording posts."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web


@dataclass
class Post:
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        import json

        return json.loads(self.body)


@dataclass
class Receiver:
    """`answers`: (status, headers) per post in order; the last one repeats."""

    answers: list[tuple[int, dict[str, str]]] = field(default_factory=lambda: [(200, {})])
    posts: list[Post] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="webhook-receiver", daemon=True)

    async def _handle(self, request: web.Request) -> web.Response:
        self.posts.append(Post(request.path, request.query_string, dict(request.headers), await request.read()))
        status, headers = self.answers[min(len(self.posts), len(self.answers)) - 1]
        return web.json_response({"ok": status < 400}, status=status, headers=headers)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}/hooks/T000/B000/secretpart"
        self._started.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the webhook receiver did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
