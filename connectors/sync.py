"""A blocking facade over the async client for one-off use (scripts, notebooks, the CLI).

It runs one `AsyncVehicleDataClient` on a private event loop in a daemon thread,
so the connection pool lives as long as the facade, like the async client's.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from typing import Any

from .client import AsyncVehicleDataClient


class VehicleDataClient:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vds-client", daemon=True)
        self._thread.start()

        async def build() -> AsyncVehicleDataClient:
            return AsyncVehicleDataClient(*args, **kwargs)

        self._client = self._run(build())

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._run(attr(*args, **kwargs))

        return call

    def __repr__(self) -> str:
        return f"VehicleDataClient(base_url={self._client.settings.base_url!r})"

    def close(self) -> None:
        if self._loop.is_running():
            self._run(self._client.aclose())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        self._loop.close()

    def __enter__(self) -> "VehicleDataClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
