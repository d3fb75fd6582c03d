"""`fleet lookup` reaches the paths and products the vendor's SDKs show (no Prefect involved)."""

from __future__ import annotations

import json

import pytest

from fleet_data.connectors.sandbox import run_sandbox
from fleet_data.flows.cli import main


@pytest.fixture(scope="module")
def sandbox():
    with run_sandbox() as sb:
        yield sb


@pytest.fixture
def enterprise(sandbox, monkeypatch):
    monkeypatch.setenv("VDS_BASE_URL", sandbox.url)
    monkeypatch.setenv("VDS_API_KEY", "test_enterprise")
    sandbox.reset_stats()
    return sandbox


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_lookup_obd_and_year_make_model(enterprise, capsys):
    assert main(["lookup", "obd", "P0115"]) == 0
    assert "Coolant" in capsys.readouterr().out
    assert main(["lookup", "year-make-model", "2012", "BMW", "5 Series", "--trim", "M550i", "--json"]) == 0
    assert _json(capsys)["bestMatch"]["trim"] == "M550i"
    assert main(["lookup", "ymm-options", "--year", "2026", "--make", "Toyota", "--model", "Tacoma", "--json"]) == 0
    assert _json(capsys)["variants"]
    served = {row["endpoint"] for row in enterprise.stats()["requests"]}
    assert {"/obdcodesdecoder", "/v1/ymm", "/v1/ymm-options"} <= served


def test_lookup_ownership_searches(enterprise, capsys):
    assert main(["lookup", "ownership-person", "John", "Sample", "123 Example St", "90210", "--json"]) == 0
    assert _json(capsys)["matches"][0]["last_name"] == "Sample"
    assert main(["lookup", "ownership-address", "123 Example St", "90210", "--include", "phones", "--json"]) == 0
    assert all("emails" not in m for m in _json(capsys)["matches"])
    assert main(["lookup", "ownership-zip", "90210", "--gender", "F", "--min-age", "45", "--limit", "5", "--json"]) == 0
    page = _json(capsys)
    assert page["count"] == len(page["records"]) <= 5 and page["filters"] == {"gender": "F", "min_age": 45}
    assert main(["lookup", "ownership-zip", "9021"]) == 1
    assert "Invalid ZIP code" in capsys.readouterr().err


def test_lookup_image_products_use_the_sdk_paths(enterprise, capsys):
    codes = [main(["lookup", name, f"https://example.com/{i}.jpg", "--json"])
             for name in ("plate-recognition", "vin-ocr") for i in range(3)]
    assert 0 in codes
    served = {row["endpoint"] for row in enterprise.stats()["requests"]}
    assert served == {"/platerecognition", "/v1/vinocr"}


def test_a_base_url_without_a_key_is_refused_before_any_call(sandbox, monkeypatch, tmp_path, capsys):
    # The README's promise: "A VDS_BASE_URL without a key is refused before anything starts".
    monkeypatch.chdir(tmp_path)  # no .env to lend a key
    monkeypatch.delenv("VDS_API_KEY", raising=False)
    monkeypatch.setenv("VDS_BASE_URL", sandbox.url)
    sandbox.reset_stats()
    assert main(["lookup", "obd", "P0115"]) == 2
    assert "VDS_API_KEY" in capsys.readouterr().err
    assert main(["lookup", "obd", "P0115", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["kind"] == "usage"
    assert sandbox.stats()["requests"] == []  # refused before the call, not by the service
