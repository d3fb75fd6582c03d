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


class TrickleReceiver:
    """A receiver stuck half-way: it reads the request, then answers one byte every `every` seconds.

    Each byte comes well within httpx's per-read timeout, so only a deadline on the whole answer ends
    a post to it. A raw socket server on 127.0.0.1 in a thread; it trickles for at most `longest`
    seconds a connection, and stops (closing every connection) when left.
    """

    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    def __init__(self, every: float = 2.0, longest: float = 600.0) -> None:
        import socket

        self.every, self.longest = every, longest
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}/hooks/T000/B000/secretpart"
        self.connections = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                continue
            self.connections += 1
            thread = threading.Thread(target=self._trickle, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _trickle(self, conn: Any) -> None:
        import time

        with conn:
            conn.settimeout(1.0)
            try:
                conn.recv(65536)  # the request (a small JSON post arrives whole on loopback)
                deadline = time.monotonic() + self.longest
                for byte in self.ANSWER:
                    if self._stop.wait(self.every) or time.monotonic() > deadline:
                        return
                    conn.sendall(bytes([byte]))
            except OSError:
                return  # the client gave up and closed: what a deadline does

    def __enter__(self) -> "TrickleReceiver":
        thread = threading.Thread(target=self._accept, name="trickle-receiver", daemon=True)
        self._threads.append(thread)
        thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._server.close()
