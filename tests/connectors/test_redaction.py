"""The API key never leaves the request: not in logs, errors, reprs, models or call records."""

from __future__ import annotations

import logging
import socket

import httpx
import pytest

from fleet_data.connectors import AsyncVehicleDataClient, Settings, VehicleDataClient
from fleet_data.connectors import errors as e

from .conftest import SECRET, reply

VIN = "1HGCM82633A004352"


def emitted_text(caplog, *things) -> str:
    parts = [r.getMessage() for r in caplog.records]
    parts += [str(getattr(r, "args", "")) for r in caplog.records]
    for thing in things:
        parts += [str(thing), repr(thing)]
        if isinstance(thing, BaseException):
            parts += [str(a) for a in thing.args] + [repr(vars(thing))]
        if hasattr(thing, "model_dump_json"):
            parts.append(thing.model_dump_json())
        if hasattr(thing, "raw"):
            parts.append(repr(thing.raw))
    return "\n".join(parts)


async def test_nothing_the_client_emits_contains_the_key(scripted, caplog):
    caplog.set_level(logging.DEBUG)
    echo = {"success": True, "input": {"key": SECRET, "vin": VIN}, "attributes": {"make": "Honda"}, "note": f"for {SECRET}"}
    failure = {"success": False, "message": f"bad request for key={SECRET}"}
    h = scripted(reply(200, echo), reply(503, failure, {"Retry-After": "0"}), reply(400, failure))
    result = await h.client.specs(VIN)
    with pytest.raises(e.VehicleDataError) as caught:
        await h.client.specs(VIN)
    sent_urls = [str(r.url) for r in h.script.requests]
    assert all(SECRET in url for url in sent_urls)  # it did travel in the request...
    text = emitted_text(caplog, result, caught.value, h.client, h.client.settings, *h.calls)
    assert "HTTP Request" in text  # httpx's own request log line was captured and scanned
    assert SECRET not in text  # ...and nowhere else
    assert result.input["key"] == "[redacted]"


async def test_connection_errors_do_not_carry_the_url(caplog):
    caplog.set_level(logging.DEBUG)
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for transport in ("aiohttp", "httpx"):
        settings = Settings(api_key=SECRET, base_url=f"http://127.0.0.1:{port}", transport=transport)
        client = AsyncVehicleDataClient(settings)
        client._sleep = _no_wait
        with pytest.raises(e.APIConnectionError) as caught:
            await client.specs(VIN)
        await client.aclose()
        assert SECRET not in emitted_text(caplog, caught.value)
        assert caught.value.__cause__ is None


def test_sync_facade_repr_and_errors_hide_the_key(caplog):
    caplog.set_level(logging.DEBUG)
    script = lambda request: reply(401, {"success": False, "message": "User with this API key was not found or the API key is disabled"})  # noqa: E731
    with VehicleDataClient(Settings(api_key=SECRET, base_url="https://vds.example.test"), http_transport=httpx.MockTransport(script)) as client:
        with pytest.raises(e.AuthenticationError) as caught:
            client.specs(VIN)
        assert SECRET not in emitted_text(caplog, caught.value, client)


async def _no_wait(_seconds: float) -> None:
    return None
