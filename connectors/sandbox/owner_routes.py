"""Ownership by VIN and by phone (enterprise plans). Errors carry `vin`/`owners: []`/`error` too.

Billing: one unit per owner returned (VIN), one per matched phone (phone and bulk); nothing when
nothing matches.
"""
from __future__ import annotations

import json
import re

from . import errors
from .calls import Call, ok
from .vehicles import OWNER_SECTIONS, narrow_owner, ownership, phone_owners, raise_magic, validate_vin

MAX_BULK_PHONES = 100
_ERROR_CODES = {400: "invalid_vin", 401: "unauthorized", 402: "insufficient_credits", 403: "api_not_enabled",
                404: "no_data", 429: "quota_exceeded"}


def _owner_error(err: errors.ApiError, **where) -> errors.ApiError:
    """The ownership error body: success:false, the looked-up vin/phone, owners:[], error, message."""
    code = "unavailable" if err.status >= 500 else _ERROR_CODES.get(err.status, "error")
    if err.status == 403 and err.message != errors.OWNERSHIP_NOT_ENABLED:
        code = "forbidden"
    err.fields = {**where, "owners": [], "error": err.fields.get("error", code), **err.fields}
    return err


def _authorize_ownership(call: Call) -> None:
    account = call.authorize()
    if not account.ownership:
        raise errors.ApiError(403, errors.OWNERSHIP_NOT_ENABLED)


def _include(raw) -> set[str] | None:
    if raw is None or raw == "" or raw == []:
        return None
    parts = raw if isinstance(raw, list) else str(raw).split(",")
    return {p.strip() for p in parts if p.strip() in OWNER_SECTIONS}


async def by_vin(request):
    call = Call(request)
    raw_vin = call.query.get("vin", "")
    try:
        _authorize_ownership(call)
        vin = validate_vin(raw_vin)
        call.require({"ownership": 1})
        raise_magic(vin, unavailable=errors.OWNERSHIP_UNAVAILABLE)
        found = ownership(vin)
        if found is None:
            raise errors.ApiError(404, errors.OWNERSHIP_NO_DATA)
        vehicle_info, owners = found
        call.charge({"ownership": len(owners)})
    except errors.ApiError as err:
        raise _owner_error(err, vin=raw_vin.strip().upper()) from None
    include = _include(call.query.get("include"))
    return ok({"vin": vin, "vehicle": vehicle_info, "owners": [narrow_owner(o, include) for o in owners],
               "error": ""}, stamp=False)


_PHONE = re.compile(r"^\+?1?(\d{10})$")


def normalize_phone(raw) -> str:
    digits = re.sub(r"[\s().-]", "", str(raw or ""))
    match = _PHONE.match(digits)
    if not match:
        raise errors.ApiError(400, errors.INVALID_PHONE, error="invalid_phone")
    return match.group(1)


async def by_phone(request):
    call = Call(request)
    raw = call.query.get("phone", "")
    try:
        _authorize_ownership(call)
        if not raw.strip():
            raise errors.ApiError(400, errors.MISSING_PHONE, error="invalid_phone")
        phone = normalize_phone(raw)
        call.require({"ownership-phone": 1})
        owners = phone_owners(phone)
        if not owners:
            raise errors.ApiError(404, errors.OWNERSHIP_PHONE_NO_DATA)
        call.charge({"ownership-phone": 1})
    except errors.ApiError as err:
        raise _owner_error(err, phone=raw) from None
    include = _include(call.query.get("include"))
    return ok({"phone": phone, "owners": [narrow_owner(o, include) for o in owners], "count": len(owners),
               "error": ""}, stamp=False)


async def by_phone_bulk(request):
    call = Call(request)
    try:
        _authorize_ownership(call)
        try:
            body = json.loads(await request.text() or "null")
        except ValueError:
            body = None
        phones = body.get("phones") if isinstance(body, dict) else None
        if not isinstance(phones, list) or not phones:
            raise errors.ApiError(400, errors.MISSING_PHONES, error="invalid_phone")
        if len(phones) > MAX_BULK_PHONES:
            raise errors.ApiError(400, errors.TOO_MANY_PHONES, error="invalid_phone")
        normalized = [normalize_phone(p) for p in phones]
        call.require({"ownership-phone": 1})
        matches = [(p, phone_owners(p)) for p in normalized]
        matches = [(p, owners) for p, owners in matches if owners]
        if not matches:
            raise errors.ApiError(404, errors.OWNERSHIP_PHONE_NO_DATA)
        call.charge({"ownership-phone": len(matches)}, bulk=True)
    except errors.ApiError as err:
        raise _owner_error(err) from None
    include = _include(call.query.get("include") or body.get("include"))
    return ok({"matches": [{"phone": p, "owners": [narrow_owner(o, include) for o in owners]}
                           for p, owners in matches], "count": len(matches), "error": ""}, stamp=False)
