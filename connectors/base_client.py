"""The one place where requests are built, sent, retried, and turned into results or errors."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Self

import httpx
import orjson

from . import errors
from .billing import estimate_units, units_for_answer
from .calls import CALL_IDS, CallIntent, CallObserver, CallRecord, CallSender, UniqueHex
from .config import Settings
from .endpoints import ENDPOINTS, Endpoint
from .redact import KEY_PARAM, REDACTED, guard_loggers, redact_echo, redact_text
from .retry import WAIT_STEP, RetryAbandoned, RetryLater, parse_retry_after, scheduled_call, stop_check, waits_end_when
from .transport import open_session

log = logging.getLogger("connectors.client")
INTERRUPTED = "interrupted"  # the reason a wait ended by the client's `interrupt` gives


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any  # decoded, redacted JSON (dict) or text for CSV/XML
    headers: Mapping[str, str]
    # With `request(..., raw=True)`: the JSON answer as the bytes the service sent, the key redacted
    # (what a fetch stages, tasks/fetch/enrich.py). None otherwise.
    raw: bytes | None = None


class BaseClient:
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        on_call: CallObserver | None = None,
        on_send: CallSender | None = None,
        http_transport: httpx.AsyncBaseTransport | None = None,
        interrupt: Callable[[], bool] | None = None,
        **overrides: Any,
    ) -> None:
        """`on_call` sees every attempt (for counting cost), `on_send` each one just before it is sent (its
        `CallIntent`: a ledger writes it first); `http_transport` replaces the pool (tests).

        `interrupt`: the client-wide form of `connectors.retry.waits_end_when`, the one way a wait in place
        ends early: asked while waiting to retry, True ends the wait, and the call raises the error it would
        have retried (a run being stopped must not sit out a 60 s Retry-After). Inside an outer
        `waits_end_when`, the outer check decides, with `RetryAbandoned`.
        """
        settings = settings or Settings.from_env()
        if overrides:
            settings = replace(settings, **overrides)
        if not settings.base_url:
            raise ValueError("no base URL: set VDS_BASE_URL, pass base_url=, or use the sandbox")
        self.settings = settings
        self._secrets = tuple(s for s in (settings.api_key,) if s)
        self._secret_bytes = tuple(s.encode() for s in self._secrets)
        guard_loggers(settings.api_key)
        self._http = open_session(settings, self._clean, http_transport)
        self._on_call = on_call
        self._on_send = on_send
        self._sleep = asyncio.sleep  # replaced in tests that count backoff without waiting
        self._interrupt = interrupt

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.settings.base_url!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def request(
        self,
        endpoint: str,
        params: Mapping[str, Any] | None = None,
        *,
        json_body: Any = None,
        batch_token: str | None = None,
        payment: str | None = None,
        idempotency_key: str | None = None,
        raw: bool = False,
    ) -> Answer:
        """Call an endpoint by name; retries by the policy; raises a `VehicleDataError` on failure.

        `raw`: a successful JSON answer also comes as its bytes (`Answer.raw`), as sent but redacted;
        its body is then parsed with orjson and left as parsed (nothing re-serialised).
        """
        if self._interrupt is None or stop_check() is not None or scheduled_call() is not None:
            return await self._request(endpoint, params, json_body, batch_token, payment, idempotency_key, raw)
        interrupt = self._interrupt
        with waits_end_when(lambda: INTERRUPTED if interrupt() else None):
            try:
                return await self._request(endpoint, params, json_body, batch_token, payment, idempotency_key, raw)
            except RetryAbandoned as abandoned:
                raise abandoned.error from None

    async def _request(self, endpoint: str, params: Mapping[str, Any] | None, json_body: Any, batch_token: str | None,
                       payment: str | None, idempotency_key: str | None, raw: bool = False) -> Answer:
        ep = ENDPOINTS[endpoint]
        query = {k: v if v.__class__ is str else _param(v) for k, v in (params or {}).items() if v is not None}
        headers: dict[str, str] = {}
        # Batch follow-ups and x402 submits authenticate without the key, per call.
        if batch_token:
            headers["X-Service-Batch-Token"] = batch_token
            self._add_secret(batch_token)
        elif payment:
            headers["X-Payment"] = payment
        elif self.settings.api_key:
            query["key"] = self.settings.api_key
        # One key per call, the same on every attempt, GET included: a retry (after a 503
        # `auto_recharge_pending` above all) is then "the same request" and cannot pay twice.
        # A scheduled call keeps its key, attempt count and retries spent between its turns in the queue.
        call = scheduled_call()
        key = (call.idempotency_key if call else None) or idempotency_key or next(_KEYS)
        if call is not None:
            call.idempotency_key = key
        headers["Idempotency-Key"] = key
        policy = self.settings.retry
        attempt = call.attempts if call else 0
        retries: dict[str, int] = call.retries if call else {}
        priced = _may_cost(ep.name, query, json_body)  # what an attempt may cost: told before it is sent, and if unanswered
        while True:
            attempt += 1
            if call is not None:
                call.attempts = attempt
            intent = CallIntent(next(CALL_IDS), ep.name, ep.method, ep.path, query.get("vin"), attempt, priced)
            if self._on_send is not None:
                self._on_send(intent)
            started = time.perf_counter()
            try:
                answer = await self._send_once(ep, query, headers, json_body, raw)
                error: errors.VehicleDataError | None = None
            except errors.VehicleDataError as exc:
                answer, error = None, exc
            latency = (time.perf_counter() - started) * 1000
            retry = error is not None and policy.should_retry(
                error, retries=retries, method=ep.method, idempotent="Idempotency-Key" in headers
            )
            self._observe(ep, query, answer, error, latency, retry, intent)
            if error is None:
                assert answer is not None
                return answer
            if not retry:
                raise error
            budget = policy.budget(error)
            assert budget is not None  # should_retry said yes, which needs a budget
            retries[budget] = retries.get(budget, 0) + 1
            delay = policy.delay(retries[budget], getattr(error, "retry_after", None))
            if call is not None:  # the scheduler's queue waits, not this call's slot
                raise RetryLater(error, delay)
            log.debug("retrying %s after %s (attempt %d) in %.2fs", ep.name, type(error).__name__, attempt, delay)
            await self._wait(delay, error)

    async def _wait(self, delay: float, error: errors.VehicleDataError) -> None:
        """Wait before a retry; inside `waits_end_when`, end with `RetryAbandoned` once its check names a reason."""
        check = stop_check()
        if check is None:
            await self._sleep(delay)
            return
        deadline = time.monotonic() + delay
        while (reason := check()) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await self._sleep(min(WAIT_STEP, left))
        raise RetryAbandoned(reason, error)

    async def _send_once(self, ep: Endpoint, query: dict[str, str], headers: dict[str, str], body: Any,
                         raw: bool = False) -> Answer:
        response = await self._http.send(ep.method, ep.path, query, headers, body, ep.name)
        if raw:
            return self._decode_raw(ep, response.status, response.content, response.headers)
        return self._decode(ep, response.status, response.content, response.headers)

    def _decode_raw(self, ep: Endpoint, status: int, content: bytes, headers: Mapping[str, str]) -> Answer:
        """A JSON success kept as the bytes sent: the key replaced in the bytes, if there, and only then.

        orjson checks the bytes are JSON and gives the body the caller checks (success flag, shape,
        units). Anything else (an error status, a body orjson refuses, an echoed key that is not ours
        verbatim) takes `_decode`'s path: classified and redacted exactly as there.
        """
        if status < 400:
            data = content
            for secret in self._secret_bytes:
                if secret in data:
                    data = _KEY_PARAM_BYTES.sub(rb"\1" + _REDACTED_BYTES, data) if b"=" in data else data
                    data = data.replace(secret, _REDACTED_BYTES)
            try:
                body = orjson.loads(data)
            except orjson.JSONDecodeError:
                body = None
            if isinstance(body, dict) and body.get("success") is not False and _echo_is_blank(body):
                return Answer(status, body, headers, data)
        answer = self._decode(ep, status, content, headers)
        return replace(answer, raw=_json_bytes(answer.body)) if isinstance(answer.body, (dict, list)) else answer

    def _decode(self, ep: Endpoint, status: int, content: bytes, headers: Mapping[str, str]) -> Answer:
        text = content.decode("utf-8", errors="replace")
        content_type = headers.get("content-type", "")
        retry_after = parse_retry_after(headers.get("retry-after"))
        is_json = "json" in content_type or text.lstrip().startswith(("{", "["))
        if not is_json and status < 400 and (ep.model is None or "xml" in content_type or "csv" in content_type):
            return Answer(status, self._clean(text), dict(headers))
        try:
            # Redact the text before parsing: one C-speed pass instead of visiting every string.
            body = json.loads(self._clean(text) if any(s in text for s in self._secrets) else text)
        except ValueError:
            if status < 400:
                raise errors.MalformedResponseError(
                    f"{ep.path} answered {status} with a body that is not valid JSON", endpoint=ep.name, status=status
                ) from None
            body = {"success": False, "message": self._clean(text.strip()[:300]) or f"HTTP {status}"}
        body = redact_echo(body)
        failed = status >= 400 or (isinstance(body, dict) and body.get("success") is False)
        if failed:
            raise errors.error_from_response(status, body if isinstance(body, dict) else {}, endpoint=ep.name, retry_after=retry_after)
        return Answer(status, body, dict(headers))

    def _observe(self, ep, query, answer, error, latency, retry, intent: CallIntent) -> None:  # noqa: ANN001
        if self._on_call is None:
            return
        status = answer.status if answer else getattr(error, "status", None)
        # A replay of an idempotent POST was billed when first answered, not again (README: our choices).
        replayed = answer is not None and answer.headers.get("idempotent-replayed", "").lower() == "true"
        units = units_for_answer(ep.name, query, answer.status, answer.body) if answer and not replayed else 0
        # No answer to a request that left: the service may have billed it, so count what it may have cost.
        unknown = status is None and getattr(error, "sent", True)
        if unknown:
            units = intent.units  # what it may have cost, as told before it was sent
        self._on_call(
            CallRecord(
                endpoint=ep.name, method=ep.method, path=ep.path, vin=query.get("vin"), status=status,
                attempt=intent.attempt, latency_ms=round(latency, 2), units=units,
                error=type(error).__name__ if error else None, will_retry=retry, replayed=replayed,
                call_id=intent.call_id, unknown=unknown,
            )
        )

    def _add_secret(self, secret: str) -> None:
        """Batch tokens are credentials too: redact them like the key."""
        if secret not in self._secrets:
            self._secrets = (*self._secrets, secret)
            self._secret_bytes = tuple(s.encode() for s in self._secrets)
            guard_loggers(secret)

    def _clean(self, text: str) -> str:
        return redact_text(text, self._secrets)


_KEYS = UniqueHex()  # Idempotency-Keys
_REDACTED_BYTES = REDACTED.encode()
_KEY_PARAM_BYTES = re.compile(KEY_PARAM.pattern.encode(), re.IGNORECASE)


def _echo_is_blank(body: dict[str, Any]) -> bool:
    """No `input.key` echoed, or only as redacted: otherwise `redact_echo` must blank it."""
    echoed = body.get("input")
    return not isinstance(echoed, dict) or not echoed.get("key") or echoed["key"] == REDACTED


def _json_bytes(body: Any) -> bytes:
    try:
        return orjson.dumps(body)
    except TypeError:  # an integer beyond 64 bits, a key that is not a string
        return json.dumps(body, default=str).encode()


def _may_cost(endpoint: str, query: Mapping[str, Any], json_body: Any) -> int:
    """What a call may cost by the spec's pricing: a recall batch's submit, one unit per VIN it carries."""
    vins = json_body.get("vins") if isinstance(json_body, dict) else None
    return estimate_units(endpoint, query, vins=len(vins) if isinstance(vins, list) else 0)


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)
