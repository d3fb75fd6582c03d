"""The one long-lived HTTP connection pool of a client.

httpx's own async pool is slow under high concurrency (encode/httpx#3215); the
aiohttp transport serves the same httpx API from aiohttp's pool. The README
has the figures that chose the default.
"""

from __future__ import annotations

import httpx

from .config import Settings


def build_http_client(settings: Settings, transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    limits = httpx.Limits(
        max_connections=settings.max_connections,
        max_keepalive_connections=settings.max_connections,
        keepalive_expiry=30.0,
    )
    if transport is not None:
        pass
    elif settings.transport == "aiohttp":
        from httpx_aiohttp import AiohttpTransport

        transport = AiohttpTransport(limits=limits)
    elif settings.transport == "httpx":
        transport = httpx.AsyncHTTPTransport(limits=limits, retries=0)
    else:
        raise ValueError(f"unknown transport {settings.transport!r}: use 'aiohttp' or 'httpx'")
    return httpx.AsyncClient(
        base_url=settings.base_url or "",
        timeout=settings.timeout,
        transport=transport,
        headers={"User-Agent": settings.user_agent, "Accept": "application/json"},
        follow_redirects=False,
    )
