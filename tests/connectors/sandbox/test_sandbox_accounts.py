"""Test keys, plan gates, monthly quotas and prepaid credits, with exact unit counts from stats."""
from __future__ import annotations

import pytest

from fleet_data.connectors.sandbox import TEST_KEYS, Account

from .sandbox_http import VIN, VIN_NO_DATA, assert_error, get


@pytest.mark.parametrize("key,status,message", [
    ("test_blocked", 403, "This API key has been blocked, please contact support if you believe this is an error."),
    ("test_unknown", 401, "User with this API key was not found or the API key is disabled"),
])
def test_blocked_and_unknown_keys(http, key, status, message):
    assert_error(get(http, "/specs", key=key, vin=VIN), status, message)


def test_inactive_key_message_starts_with_the_spec_text(http):
    response = get(http, "/specs", key="test_inactive", vin=VIN)
    assert response.status_code == 401
    message = response.json()["message"]
    assert message.startswith("User with this API key is not active.") and "billing" in message


@pytest.mark.parametrize("path", ["/history", "/v1/lien-theft", "/v2/marketvalue"])
def test_basic_tier_is_gated(http, path):
    response = get(http, path, key="test_basic_tier", vin=VIN)
    assert response.status_code == 403
    assert response.json()["message"].startswith("This API is not available for your current subscription tier.")


def test_basic_tier_recalls_ymm_not_enabled_but_specs_allowed(http):
    assert_error(get(http, "/v1/recalls-ymm", key="test_basic_tier", year="2015", make="Honda", model="Civic"),
                 404, "This feature is not enabled for your account")
    assert get(http, "/specs", key="test_basic_tier", vin=VIN).status_code == 200


def test_quota_counts_successes_only_and_shares_related_apis(sandbox, http):
    key = "test_quota_3"
    sandbox.reset_stats()
    assert get(http, "/v2/marketvalue", key=key, vin=VIN).status_code == 200
    assert get(http, "/v2/marketvalue", key=key, vin=VIN, condition="bad").status_code == 400  # free
    assert get(http, "/v2/marketvalue", key=key, vin=VIN_NO_DATA).status_code == 404        # free
    assert get(http, "/marketvalue", key=key, vin=VIN).status_code == 200                    # same quota
    assert get(http, "/v2/marketvalue", key=key, vin=VIN).status_code == 200
    over = get(http, "/marketvalue", key=key, vin=VIN)
    assert over.status_code == 429
    body = over.json()
    assert body["usage"] == {"current": 3, "limit": 3, "remaining": 0}
    assert "Market Value API" in body["message"] and "limit 3" in body["message"]
    assert get(http, "/specs", key=key, vin=VIN).status_code == 200  # another API, its own quota
    assert sandbox.units(key, "market-value") == 3 and sandbox.units(key, "specs") == 1
    assert sandbox.count("/marketvalue", key=key, status=429) == 1


def test_bulk_request_beyond_the_quota_is_rejected_whole(sandbox, http):
    key = "test_quota_5"
    sandbox.reset_stats()
    assert get(http, "/v1/recalls", key=key, vin=VIN).status_code == 200
    vins = [VIN] * 6
    response = http.post("/v1/recalls-batch/submit", params={"key": key}, json={"vins": vins})
    assert response.status_code == 429
    body = response.json()
    assert body["usage"] == {"current": 1, "limit": 5, "remaining": 4}
    assert body["message"].endswith("This is a bulk request needing 6 units.")
    assert sandbox.units(key, "recalls") == 1
    accepted = http.post("/v1/recalls-batch/submit", params={"key": key}, json={"vins": vins[:4]})
    assert accepted.status_code == 202 and sandbox.units(key, "recalls") == 5


def test_prepaid_credits_reject_whole_and_spend_nothing(sandbox, http):
    key = "test_prepaid_7"
    sandbox.reset_stats()
    for _ in range(2):
        assert get(http, "/specs", key=key, vin=VIN).status_code == 200
    response = http.get("/v1/us-platedecoder", params={"key": key, "plate": "TST000", "state": "TX"})
    if response.status_code == 200:  # 5 credits spent: now 0 left
        left = 0
    else:
        assert response.status_code == 404  # unknown plate: free
        left = 5
    short = get(http, "/v1/us-platedecoder", key=key, plate="TST001", state="TX", decodeVIN="1")
    assert short.status_code == 402
    body = short.json()
    assert body["code"] == "insufficient_credits" and body["billingUrl"].startswith("https://")
    assert body["credits"] == {"available": left, "cost": 6, "remaining": left, "shortfall": 6 - left}
    assert sum(u["units"] for u in sandbox.stats()["units"] if u["key"] == key) == 7 - left


def test_auto_recharge_pending_then_success(sandbox, http):
    sandbox.add_account("recharging", Account(prepaid_credits=10, auto_recharge_pending=2))
    statuses = [get(http, "/specs", key="recharging", vin=VIN) for _ in range(3)]
    assert [r.status_code for r in statuses] == [503, 503, 200]
    assert statuses[0].json()["code"] == "auto_recharge_pending" and statuses[0].json()["retryable"] is True
    assert sandbox.units("recharging") == 1


def test_test_recharge_key(http):
    assert get(http, "/specs", key="test_recharge_1", vin=VIN).status_code == 503
    assert get(http, "/specs", key="test_recharge_1", vin=VIN).status_code == 200


def test_configured_account_wins_over_test_key_rules(sandbox, http):
    sandbox.add_account("test_blocked_but_not", Account(plan="enterprise", ownership=True))
    assert get(http, "/v1/ownership/vin", key="test_blocked_but_not", vin=VIN).status_code == 200
    sandbox.add_account("limited", Account(monthly_quota=0))
    assert get(http, "/specs", key="limited", vin=VIN).status_code == 429


def test_test_keys_are_documented():
    assert {"test_enterprise", "test_blocked", "test_inactive", "test_unknown", "test_basic_tier",
            "test_prepaid_<N>", "test_quota_<N>"} <= set(TEST_KEYS)


def test_stats_count_per_endpoint_key_and_status(sandbox, http):
    sandbox.reset_stats()
    get(http, "/specs", key="counted", vin=VIN)
    get(http, "/specs", key="counted", vin=VIN)
    get(http, "/specs", key="counted", vin="BAD")
    sandbox.stats()  # admin calls are not counted
    stats = sandbox.stats()
    assert stats["requests"] == [
        {"endpoint": "/specs", "key": "counted", "status": 200, "count": 2},
        {"endpoint": "/specs", "key": "counted", "status": 400, "count": 1},
    ]
    assert stats["units"] == [{"key": "counted", "api": "specs", "units": 2}] and stats["total"] == 3
