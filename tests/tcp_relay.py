"""A TCP relay on loopback in front of a server, that a test stops and starts again on the same port.

Stopped, the address refuses connections and every open one is cut, as when a server or its network goes
away; the server behind it keeps its state (moto's S3 server keeps its bucket), so a later run can find what
was put there before, as it would on the real service once it is back.

    with TcpRelay(("127.0.0.1", moto_port)) as relay:   # relay.url: http://127.0.0.1:<port>
        relay.stop(); ...; relay.start()
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class TcpRelay:
    def __init__(self, target: tuple[str, int], port: int | None = None):
        self.target, self.port = target, port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-relay", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            writer.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            self._writers -= {writer, up_writer}

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port, reuse_address=True)

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):  # what was open is cut, not left to finish
                writer.transport.abort()
            await self._server.wait_closed()
            self._server = None

    def start(self) -> None:
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)

    def __enter__(self) -> "TcpRelay":
        self._thread.start()
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
