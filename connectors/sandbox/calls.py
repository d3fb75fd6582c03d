"""One API call as handlers see it: the caller's account, its billing, and how answers are written."""
from __future__ import annotations

import json
from typing import Any
from xml.sax.saxutils import escape

try:  # a Prefect dependency, so normally present; the sandbox works without it
    import orjson

    _dumps = orjson.dumps
except ImportError:  # pragma: no cover
    def _dumps(value: Any, default: Any = None, option: Any = None) -> bytes:  # orjson.dumps' parameters
        return json.dumps(value).encode()

from aiohttp import web

from . import errors
from .accounts import BASIC_TIER_DISABLED_FEATURES, BASIC_TIER_GATED, Account
from .state import STATE, SandboxState
from .vehicles import now_iso



class Call:
    __slots__ = ("request", "state", "query", "key")

    def __init__(self, request: web.Request):
        self.request = request
        self.state: SandboxState = request.app[STATE]
        self.query = request.query
        self.key = self.query.get("key", "")

    def authorize(self, gate: str | None = None) -> Account:
        """401/403 for the key; 403/404 when the plan lacks the API (`gate` names it)."""
        account = self.state.ledger.authenticate(self.key)
        if account.plan == "basic" and gate in BASIC_TIER_GATED:
            raise errors.ApiError(403, errors.TIER_GATED)
        if account.plan == "basic" and gate in BASIC_TIER_DISABLED_FEATURES:
            raise errors.ApiError(404, errors.FEATURE_NOT_ENABLED)
        return account

    def require(self, charges: dict[str, int], *, bulk: bool = False) -> None:
        self.state.ledger.require(self.key, charges, bulk=bulk)

    def charge(self, charges: dict[str, int], *, bulk: bool = False) -> None:
        self.state.ledger.charge(self.key, charges, bulk=bulk)

    def wants_xml(self) -> bool:
        return self.query.get("format", "json").lower() == "xml"

    def input(self, *names: str) -> dict:
        """The request parameters echoed in `input` (the key too, as the real service does)."""
        return {n: self.query[n] for n in names if n in self.query}


def ok(payload: dict, *, xml: bool = False, status: int = 200, stamp: bool = True) -> web.Response:
    body = {"success": True, **payload}
    if stamp:
        body["timestamp"] = now_iso()
    if xml:
        return web.Response(status=status, text='<?xml version="1.0" encoding="UTF-8"?>' + to_xml(body),
                            content_type="application/xml")
    return web.Response(status=status, body=_dumps(body), content_type="application/json")


def error_response(err: errors.ApiError, *, retry_after: int, omit_retry_after: bool) -> web.Response:
    headers = dict(err.headers)
    if "Retry-After" in headers:
        if omit_retry_after:
            del headers["Retry-After"]
        else:
            headers["Retry-After"] = str(retry_after)
    return web.Response(status=err.status, body=_dumps(err.body()), content_type="application/json",
                        headers=headers)


def to_xml(value, tag: str = "response") -> str:
    if isinstance(value, dict):
        inner = "".join(to_xml(v, k if k[:1].isalpha() else f"item_{k}") for k, v in value.items())
    elif isinstance(value, list):
        inner = "".join(to_xml(v, "item") for v in value)
    elif isinstance(value, bool):
        inner = "true" if value else "false"
    elif value is None:
        inner = ""
    else:
        inner = escape(str(value))
    return f"<{tag}>{inner}</{tag}>"
