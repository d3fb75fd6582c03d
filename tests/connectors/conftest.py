"""Helpers for client tests: a scripted `httpx.MockTransport` that records every request."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

import httpx
import pytest

from fleet_data.connectors import AsyncVehicleDataClient, CallRecord, RetryPolicy, Settings

SECRET = "sk-live-SECRET-9f8e7d6c"


@dataclass
class Script:
    """Answers requests from a list, in order; the last answer repeats."""

    answers: list[Any]
    requests: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return answer(request)
        return answer


def reply(status: int, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    if body is None:
        body = {"success": status < 400}
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    hdrs = {"content-type": "application/json", **(headers or {})}
    return httpx.Response(status, content=content, headers=hdrs)


@dataclass
class Harness:
    client: AsyncVehicleDataClient
    script: Script
    sleeps: list[float]
    calls: list[CallRecord]

    @property
    def attempts(self) -> int:
        return len(self.script.requests)


@pytest.fixture
def scripted() -> Callable[..., Harness]:
    made: list[Harness] = []

    def make(*answers: Any, policy: RetryPolicy | None = None, api_key: str = SECRET) -> Harness:
        script = Script(list(answers))
        calls: list[CallRecord] = []
        settings = Settings(api_key=api_key, base_url="https://vds.example.test", retry=policy or RetryPolicy())
        client = AsyncVehicleDataClient(settings, on_call=calls.append, http_transport=httpx.MockTransport(script))
        sleeps: list[float] = []

        async def record_sleep(seconds: float) -> None:
            sleeps.append(seconds)

        client._sleep = record_sleep  # count backoff without waiting for it
        harness = Harness(client, script, sleeps, calls)
        made.append(harness)
        return harness

    yield make
