"""Faults and latency: each kind observable over the socket, and the whole sequence replayable from a seed."""
from __future__ import annotations

import httpx
import pytest

from fleet_data.connectors.sandbox import FaultConfig

from .sandbox_http import VIN, get


def statuses(http, n=40) -> list[int]:
    return [get(http, "/specs", vin=VIN).status_code for _ in range(n)]


def test_same_seed_same_sequence_of_statuses(sandbox, http):
    sandbox.set_faults(FaultConfig(rate=0.4, seed=1234))
    first = statuses(http)
    sandbox.set_faults(FaultConfig(rate=0.4, seed=1234))
    second = statuses(http)
    sandbox.set_faults(FaultConfig(rate=0.4, seed=99))
    third = statuses(http)
    assert first == second
    assert first != third
    assert set(first) <= {200, 500, 502, 503, 504} and 200 in first and len(set(first)) > 2


def test_fault_bodies_and_retry_after(sandbox, http):
    sandbox.set_faults(FaultConfig(rate=1.0, statuses=[503]))
    response = get(http, "/v1/recalls", vin=VIN)
    assert response.status_code == 503 and response.headers["Retry-After"] == "60"
    assert response.json() == {"success": False, "message": "Cannot access the internet at this time",
                               "retryable": True}
    sandbox.set_faults(FaultConfig(rate=1.0, statuses=[500]))
    response = get(http, "/v1/recalls", vin=VIN)
    assert response.json() == {"success": False, "message": "Internal server error"}
    assert "Retry-After" not in response.headers
    sandbox.set_faults(FaultConfig(rate=1.0, statuses=[502], omit_retry_after=True))
    response = get(http, "/v1/recalls", vin=VIN)
    assert response.json()["message"] == "Could not fetch data" and "Retry-After" not in response.headers
    sandbox.set_faults(FaultConfig(rate=1.0, statuses=[400]))  # a status the catalog has no message for
    response = get(http, "/v1/recalls", vin=VIN)
    assert response.status_code == 400 and response.json() == {"success": False, "message": "Bad Request"}


def test_faulted_calls_are_counted_and_not_billed(sandbox, http):
    sandbox.reset_stats()
    sandbox.set_faults(FaultConfig(rate=1.0, statuses=[504]))
    get(http, "/specs", key="faulted", vin=VIN)
    assert sandbox.count("/specs", key="faulted", status=504) == 1
    assert sandbox.units("faulted") == 0


def test_dropped_connection_and_malformed_body(sandbox, http):
    sandbox.reset_stats()
    sandbox.set_faults(FaultConfig(drop_rate=1.0))
    with pytest.raises(httpx.RemoteProtocolError):
        get(http, "/specs", key="dropped", vin=VIN)
    sandbox.set_faults(FaultConfig(malformed_rate=1.0))
    response = get(http, "/specs", key="dropped", vin=VIN)
    assert response.status_code == 200
    with pytest.raises(ValueError):
        response.json()
    assert sandbox.count("/specs", key="dropped", status=0) == 1


def test_timeout_outlasts_the_client(sandbox, http):
    sandbox.set_faults(FaultConfig(timeout_rate=1.0, timeout_seconds=3))
    with pytest.raises(httpx.ReadTimeout):
        http.get("/specs", params={"key": "slowpoke", "vin": VIN}, timeout=0.3)
    sandbox.set_faults(FaultConfig())
    assert sandbox.count("/specs", key="slowpoke", status=504) == 1


def test_faults_spare_admin_routes_and_openapi(sandbox, http):
    from fleet_data.connectors.sandbox.config import DEFAULT_OPENAPI
    sandbox.reset_stats()
    sandbox.set_faults(FaultConfig(rate=1.0))
    assert http.get("/_sandbox/health").status_code == 200
    assert http.get("/openapi.yaml").status_code == (200 if DEFAULT_OPENAPI.is_file() else 404)
    assert sandbox.stats()["total"] == 0


def test_latency_config_round_trips_through_admin(sandbox, http):
    sandbox.set_faults(FaultConfig(latency_ms=(1, 3), seed=5))
    assert http.get("/_sandbox/faults").json()["latency_ms"] == [1, 3]
    assert statuses(http, 5) == [200] * 5



def test_journal_records_calls_in_order_and_peak_in_flight_counts_overlap(sandbox, http):
    import concurrent.futures

    sandbox.reset_stats()
    sandbox.record_journal(True)
    try:
        sandbox.set_faults(FaultConfig(rate=1.0, statuses=[503], retry_after_seconds=0))
        get(http, "/specs", vin=VIN)
        sandbox.set_faults(FaultConfig())
        get(http, "/v1/recalls", vin="1HGCM82633A004352")
        journal = [(c["endpoint"], c["vin"], c["status"]) for c in sandbox.journal()]
        assert journal == [("/specs", VIN, 503), ("/v1/recalls", "1HGCM82633A004352", 200)]
        assert all(c["key"] for c in sandbox.journal())
    finally:
        sandbox.record_journal(False)
    assert sandbox.peak_in_flight() == 1  # one call at a time so far

    sandbox.reset_stats()
    sandbox.set_faults(FaultConfig(latency_ms=(300, 300)))
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda _: httpx.get(f"{sandbox.url}/specs", params={"vin": VIN, "key": "k"},
                                                    trust_env=False, timeout=10).status_code, range(6)))
    sandbox.set_faults(FaultConfig())
    assert len(answers) == 6
    assert 2 <= sandbox.peak_in_flight() <= 6 and sandbox.stats()["in_flight"] == 0
    assert sandbox.journal() == []  # off: nothing recorded
