"""Constants and small request helpers shared by the sandbox tests."""
from __future__ import annotations

import httpx

KEY = "sandbox-test-key"
VIN = "1HGCM82633A004352"          # data, open recalls, an ownership record
VIN_NO_RECALLS = "1HGCM82633A004353"
VIN_NO_DATA = "1HGCM82633A004363"
VIN_INTERNATIONAL = "WBA3A5C50DF123456"



def get(http: httpx.Client, path: str, key: str | None = KEY, **params) -> httpx.Response:
    if key is not None:
        params["key"] = key
    return http.get(path, params=params)


def assert_error(response: httpx.Response, status: int, message: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False
    assert body["message"] == message
    return body
