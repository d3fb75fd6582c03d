"""The service's error catalog as one exception tree.

`error_from_response` is the only place a response becomes an exception: it
reads the status *and* the body (`message`, `code`, `error`, `usage`,
`credits`, `retryable`), because legacy v1 routes answer some validation
problems with HTTP 500 and only the message tells them apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Usage:
    """Quota usage carried by a 429."""

    current: float | None
    limit: float | None
    remaining: float | None


@dataclass(frozen=True)
class Credits:
    """Prepaid credit figures carried by a 402."""

    available: float | None
    cost: float | None
    remaining: float | None
    shortfall: float | None


class VehicleDataError(Exception):
    """Base of every error the client raises. Messages never contain the API key.

    `retryable`: whether asking again later may get an answer (a 5xx, a timeout, a dropped connection), as
    `failures.retryable` records it and the next refresh plans it; not whether the client retries in place,
    which is connectors/retry.py's policy (a 500 is retried once there, yet worth asking again next run).
    """

    retryable: bool = False

    def __init__(self, message: str, *, endpoint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.endpoint = endpoint

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, endpoint={self.endpoint!r})"


class APIConnectionError(VehicleDataError):
    """The request did not get an HTTP answer (refused, reset, dropped)."""

    retryable = True
    # False when no connection was ever made (refused, connect or pool timeout): the request never left, so
    # the service cannot have billed it. Otherwise it may have (the call ledger counts it as possible).
    sent: bool = True


class APITimeoutError(APIConnectionError):
    """Connect, read, write or pool timeout."""


class MalformedResponseError(VehicleDataError):
    """A response whose body is not the JSON the endpoint promises (truncated, garbled)."""

    retryable = True

    def __init__(self, message: str, *, endpoint: str | None = None, status: int | None = None) -> None:
        super().__init__(message, endpoint=endpoint)
        self.status = status


class APIStatusError(VehicleDataError):
    """The service answered with `success: false` or an error status."""

    status_code: int = 0

    def __init__(
        self,
        message: str,
        *,
        status: int,
        body: Mapping[str, Any] | None = None,
        endpoint: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, endpoint=endpoint)
        self.status = status
        self.body: dict[str, Any] = dict(body or {})
        self.code: str | None = self.body.get("code")
        self.error_code: str | None = self.body.get("error") or None
        self.retry_after = retry_after
        # An answer that says it failed under a success status (200, `success: false`) is the service's word on
        # that input, not a fault that passes.
        self.retryable = bool(self.body.get("retryable", type(self).retryable and not 200 <= status < 300))

    def __str__(self) -> str:
        return f"{self.status} {self.message}" if self.status else self.message


class InvalidRequestError(APIStatusError):
    """400 (or a legacy 500) for a missing or invalid parameter; consumes no quota."""

    status_code = 400


class AuthenticationError(APIStatusError):
    """401: missing, unknown, disabled or inactive key."""

    status_code = 401


class InsufficientCreditsError(APIStatusError):
    """402: the prepaid balance does not cover the whole request; nothing was spent."""

    status_code = 402

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        c = self.body.get("credits") or {}
        self.credits = Credits(c.get("available"), c.get("cost"), c.get("remaining"), c.get("shortfall"))
        self.billing_url: str | None = self.body.get("billingUrl")


class PermissionDeniedError(APIStatusError):
    """403: the key is blocked, or the plan lacks this API."""

    status_code = 403


class KeyBlockedError(PermissionDeniedError):
    """403: the key has been blocked."""


class PlanNotAllowedError(PermissionDeniedError):
    """403: the subscription tier (or the key's settings) does not include this API."""


class NotFoundError(APIStatusError):
    """404: no data for this input (stable: the same input gives the same answer)."""

    status_code = 404


class FeatureNotEnabledError(NotFoundError):
    """404 `This feature is not enabled for your account` (recalls by year/make/model)."""


class InvalidRegionError(NotFoundError):
    """404 `Invalid state or country code.` (plate decoders): a bad input, not a miss."""


class MethodNotAllowedError(APIStatusError):
    status_code = 405


class BatchNotCompleteError(APIStatusError):
    """Results asked for before the batch finished (409 here; the spec does not pin the status)."""

    status_code = 409


class QuotaExceededError(APIStatusError):
    """429: the API's quota for the billing period is used up. Not retried."""

    status_code = 429

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        u = self.body.get("usage") or {}
        self.usage = Usage(u.get("current"), u.get("limit"), u.get("remaining"))


class InternalServerError(APIStatusError):
    """500: retried once in place; worth asking again at the next run."""

    status_code = 500
    retryable = True


class ProviderAuthenticationError(InternalServerError):
    """500 CV-001/CV-002: the service failed to authenticate upstream; never retried automatically."""

    retryable = False


class UpstreamError(APIStatusError):
    """502/503/504: the upstream provider failed; retried with backoff."""

    retryable = True


class BadGatewayError(UpstreamError):
    status_code = 502


class ServiceUnavailableError(UpstreamError):
    status_code = 503


class AutoRechargePendingError(ServiceUnavailableError):
    """503 `auto_recharge_pending`: retry with the same idempotency key; never pay again."""


class GatewayTimeoutError(UpstreamError):
    status_code = 504


# Messages that mean "your input is wrong" whatever the status says (legacy v1 routes use 500).
_VALIDATION_PREFIXES = (
    "Missing vin",
    "Wrong VIN length",
    "Invalid VIN",
    "Missing vehicle registration number",
    "Missing 2 letter state code",
    "Invalid condition",
    "Invalid mileage",
    "Missing image data",
    "Invalid image data format",
    "Please supply a make and model",
    "Missing required parameters",
    "Missing batchId",
    "Invalid dimension",
    "Request body must include",
)

_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    402: InsufficientCreditsError,
    403: PermissionDeniedError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: BatchNotCompleteError,
    429: QuotaExceededError,
    500: InternalServerError,
    502: BadGatewayError,
    503: ServiceUnavailableError,
    504: GatewayTimeoutError,
}


def _classify(status: int, body: Mapping[str, Any], message: str) -> type[APIStatusError]:
    lowered = message.lower()
    code = str(body.get("code") or "")
    # Body-first rules: these hold whatever the status line says.
    if message.startswith(_VALIDATION_PREFIXES) or body.get("error") == "invalid_vin":
        return InvalidRequestError
    if "not yet complete" in lowered:
        return BatchNotCompleteError
    if code == "insufficient_credits":
        return InsufficientCreditsError
    if code == "auto_recharge_pending":
        return AutoRechargePendingError
    if "CV-001" in message or "CV-002" in message:
        return ProviderAuthenticationError
    if status == 403 or body.get("error") == "api_not_enabled":
        return KeyBlockedError if "blocked" in lowered else PlanNotAllowedError
    if status == 404 and "not enabled for your account" in lowered:
        return FeatureNotEnabledError
    if status == 404 and "invalid state or country" in lowered:
        return InvalidRegionError
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if body.get("retryable") is True or 500 < status < 600:
        return UpstreamError
    if 400 <= status < 500:
        return InvalidRequestError
    return InternalServerError


def error_from_response(
    status: int,
    body: Mapping[str, Any] | None,
    *,
    endpoint: str | None = None,
    retry_after: float | None = None,
) -> APIStatusError:
    """The exception for an error answer. `body` must already be redacted."""
    body = body or {}
    message = str(body.get("message") or body.get("error") or f"HTTP {status}")
    cls = _classify(status, body, message)
    return cls(message, status=status, body=body, endpoint=endpoint, retry_after=retry_after)
