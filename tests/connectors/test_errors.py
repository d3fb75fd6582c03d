"""Every status and body of the spec's error catalog becomes its own exception, with its data."""

from __future__ import annotations

import pytest

from fleet_data.connectors import errors as e

from .conftest import reply

VIN = "1HGCM82633A004352"

CATALOG = [
    (400, {"message": "Missing vin (vehicle identification number)"}, e.InvalidRequestError),
    (400, {"message": "Wrong VIN length, must be 17 characters"}, e.InvalidRequestError),
    (400, {"message": "Invalid VIN"}, e.InvalidRequestError),
    (400, {"message": "Invalid condition. Available conditions: excellent, clean, average, rough"}, e.InvalidRequestError),
    (400, {"message": "Invalid mileage. Must be a number"}, e.InvalidRequestError),
    (401, {"message": "Missing API key"}, e.AuthenticationError),
    (401, {"message": "User with this API key was not found or the API key is disabled"}, e.AuthenticationError),
    (401, {"message": "User with this API key is not active. Please update your billing details."}, e.AuthenticationError),
    (403, {"message": "This API key has been blocked, please contact support if you believe this is an error."}, e.KeyBlockedError),
    (403, {"message": "This API is not available for your current subscription tier. Please upgrade."}, e.PlanNotAllowedError),
    (404, {"message": "No data found for this VIN"}, e.NotFoundError),
    (404, {"message": "This feature is not enabled for your account"}, e.FeatureNotEnabledError),
    (404, {"message": "Invalid state or country code."}, e.InvalidRegionError),
    (405, {"message": "Method not allowed. Only POST is allowed."}, e.MethodNotAllowedError),
    (409, {"message": "Batch processing is not yet complete. Please check the status later."}, e.BatchNotCompleteError),
    (500, {"message": "Internal server error"}, e.InternalServerError),
    (500, {"message": "Unable to authenticate internal request (code CV-001). Please try again later"}, e.ProviderAuthenticationError),
    (500, {"message": "Unable to authenticate internal request (code CV-002). Please try again later"}, e.ProviderAuthenticationError),
    (502, {"message": "Could not fetch data", "retryable": True}, e.BadGatewayError),
    (503, {"message": "Cannot access the internet at this time", "retryable": True}, e.ServiceUnavailableError),
    (503, {"message": "Auto-recharge is processing", "code": "auto_recharge_pending"}, e.AutoRechargePendingError),
    (504, {"message": "Request timed out. Please try again.", "retryable": True}, e.GatewayTimeoutError),
    # Legacy v1 routes answer validation problems with 500: the body decides.
    (500, {"message": "Please supply a make and model to search for images"}, e.InvalidRequestError),
    (500, {"message": "Missing vin (vehicle identification number)"}, e.InvalidRequestError),
    # "Not complete" whatever status a real service picks for it.
    (400, {"message": "Batch processing is not yet complete. Check status later."}, e.BatchNotCompleteError),
]


@pytest.mark.parametrize(("status", "body", "expected"), CATALOG, ids=[f"{s}-{b['message'][:30]}" for s, b, _ in CATALOG])
async def test_catalog_status_gives_its_exception(scripted, status, body, expected):
    h = scripted(reply(status, {"success": False, **body}))  # repeats: retries cannot rescue it
    with pytest.raises(e.VehicleDataError) as caught:
        await h.client.history(VIN)
    assert type(caught.value) is expected
    assert caught.value.status == status
    assert caught.value.message == body["message"]
    assert caught.value.endpoint == "history"


async def test_quota_429_carries_usage(scripted):
    body = {
        "success": False,
        "message": "Monthly quota exceeded for the History API (billing period 2026-11, tier standard): 1000 of 1000 used.",
        "usage": {"current": 1000, "limit": 1000, "remaining": 0},
    }
    h = scripted(reply(429, body))
    with pytest.raises(e.QuotaExceededError) as caught:
        await h.client.history(VIN)
    assert caught.value.usage == e.Usage(current=1000, limit=1000, remaining=0)
    assert "History API" in str(caught.value)


async def test_credits_402_carries_credits_and_billing_url(scripted):
    body = {
        "success": False,
        "code": "insufficient_credits",
        "message": "Insufficient credits for this request.",
        "billingUrl": "https://billing.example.test",
        "credits": {"available": 3, "cost": 5, "remaining": 3, "shortfall": 2},
    }
    h = scripted(reply(402, body))
    with pytest.raises(e.InsufficientCreditsError) as caught:
        await h.client.us_plate("ABC123", "CA")
    assert caught.value.credits == e.Credits(available=3, cost=5, remaining=3, shortfall=2)
    assert caught.value.code == "insufficient_credits"
    assert caught.value.billing_url == "https://billing.example.test"


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [(400, "invalid_vin", e.InvalidRequestError), (403, "api_not_enabled", e.PlanNotAllowedError), (404, "no_data", e.NotFoundError)],
)
async def test_ownership_errors_carry_their_error_code(scripted, status, code, expected):
    body = {"success": False, "vin": VIN, "owners": [], "error": code, "message": f"ownership says {code}"}
    h = scripted(reply(status, body))
    with pytest.raises(expected) as caught:
        await h.client.ownership(VIN)
    assert caught.value.error_code == code


async def test_success_false_with_200_is_still_an_error(scripted):
    h = scripted(reply(200, {"success": False, "message": "Invalid VIN"}))
    with pytest.raises(e.InvalidRequestError):
        await h.client.specs(VIN)


async def test_non_json_error_body_keeps_status_and_text(scripted):
    h = scripted(reply(502, "<html>Bad Gateway</html>", {"content-type": "text/html"}))
    with pytest.raises(e.BadGatewayError) as caught:
        await h.client.specs(VIN)
    assert "Bad Gateway" in caught.value.message


# Whether asking again at the next run may help (failures.retryable, what the next refresh plans again), as the
# data dictionary states it: 5xx and answers that never came, yes; a 4xx that cannot change, no. Not the client's
# own retries in place (connectors/retry.py: a 500 is retried once there).
RETRY_NEXT_RUN = [
    (500, {"message": "Internal server error"}, True),
    (502, {"message": "Could not fetch data", "retryable": True}, True),
    (503, {"message": "Cannot access the internet at this time", "retryable": True}, True),
    (504, {"message": "Request timed out. Please try again."}, True),
    (500, {"message": "Unable to authenticate internal request (code CV-001). Please try again later"}, False),
    (500, {"message": "Missing vin (vehicle identification number)"}, False),  # a legacy route's validation
    (400, {"message": "Invalid VIN"}, False),
    (404, {"message": "This feature is not enabled for your account"}, False),
    (404, {"message": "Invalid state or country code."}, False),
    (405, {"message": "Method not allowed. Only POST is allowed."}, False),
    (200, {"message": "No data found for this VIN"}, False),  # `success: false` under a 200: the service's word
]


@pytest.mark.parametrize(("status", "body", "retryable"), RETRY_NEXT_RUN,
                         ids=[f"{s}-{b['message'][:24]}" for s, b, _ in RETRY_NEXT_RUN])
def test_a_failure_is_retryable_at_the_next_run_as_the_dictionary_says(status, body, retryable):
    assert e.error_from_response(status, {"success": False, **body}).retryable is retryable


def test_an_answer_that_never_came_is_retryable():
    assert e.APITimeoutError("read timed out").retryable and e.APIConnectionError("reset").retryable
