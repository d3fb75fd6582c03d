"""Ownership by VIN, phone, person, address and ZIP (enterprise plans). Errors carry `owners: []` and
`error` too (and the looked-up `vin`/`phone`).

Billing: one unit per owner returned (VIN), per matched phone (phone and bulk), per record returned
(person, address, ZIP); nothing when nothing matches. `variant` is the legacy alias of `include`.
"""
from __future__ import annotations

import json
import re

from . import errors, people
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


# ASCII digits only: `\d` would let other scripts' digits through.
_ZIP = re.compile(r"^([0-9]{5})(?:-[0-9]{4})?$")
_ZIP5 = re.compile(r"^[0-9]{5}$")
_WHOLE = re.compile(r"^[0-9]{1,4}$")


def _narrowing(call: Call) -> set[str] | None:
    return _include(call.query.get("include") or call.query.get("variant"))


def _search_input(call: Call, *names: str) -> dict:
    return {n: call.query[n] for n in (*names, "include", "variant") if n in call.query}


def _required(call: Call, names: tuple[str, ...], message: str) -> list[str]:
    values = [call.query.get(n, "").strip() for n in names]
    if not all(values):
        raise errors.ApiError(400, message, error="invalid_input")
    return values


def _zip5(raw: str) -> str:
    match = _ZIP.match(raw)
    if not match:
        raise errors.ApiError(400, errors.INVALID_ZIP, error="invalid_zip")
    return match.group(1)


def _found(call: Call, records: list[dict], no_data: str) -> list[dict]:
    """404 `no_data` (free) when nothing matched; otherwise one unit per record, narrowed."""
    if not records:
        raise errors.ApiError(404, no_data)
    call.charge({"ownership": len(records)})
    include = _narrowing(call)
    return [narrow_owner(r, include) for r in records]


async def by_person(request):
    call = Call(request)
    try:
        _authorize_ownership(call)
        first, last, street, raw_zip = _required(call, ("first_name", "last_name", "address", "zip"),
                                                 errors.MISSING_PERSON)
        if len(first) > 50 or len(last) > 50 or len(street) > 100:
            raise errors.ApiError(400, errors.PERSON_TOO_LONG, error="invalid_input")
        zip5 = _zip5(raw_zip)
        call.require({"ownership": 1})
        matches = _found(call, people.by_person(first, last, street, zip5), errors.OWNERSHIP_PERSON_NO_DATA)
    except errors.ApiError as err:
        raise _owner_error(err) from None
    return ok({"input": _search_input(call, "first_name", "last_name", "address", "zip"), "count": len(matches),
               "matches": matches, "error": ""}, stamp=False)


async def by_address(request):
    call = Call(request)
    try:
        _authorize_ownership(call)
        street, raw_zip = _required(call, ("address", "zip"), errors.MISSING_ADDRESS)
        if len(street) > 100:
            raise errors.ApiError(400, errors.PERSON_TOO_LONG, error="invalid_input")
        zip5 = _zip5(raw_zip)
        call.require({"ownership": 1})
        matches = _found(call, people.by_address(street, zip5), errors.OWNERSHIP_ADDRESS_NO_DATA)
    except errors.ApiError as err:
        raise _owner_error(err) from None
    return ok({"input": _search_input(call, "address", "zip"), "count": len(matches), "matches": matches,
               "error": ""}, stamp=False)


def _whole(call: Call, name: str, *, low: int | None = None, high: int | None = None,
           message: str | None = None) -> int | None:
    raw = call.query.get(name, "").strip()
    if not raw:
        return None
    if not _WHOLE.match(raw) or (low is not None and int(raw) < low) or (high is not None and int(raw) > high):
        raise errors.ApiError(400, message or errors.INVALID_AGE.format(name=name), error="invalid_input")
    return int(raw)


async def by_zip(request):
    call = Call(request)
    q = call.query
    try:
        _authorize_ownership(call)
        (zip5,) = _required(call, ("zip",), errors.MISSING_ZIP)
        if not _ZIP5.match(zip5):
            raise errors.ApiError(400, errors.INVALID_ZIP_SEARCH, error="invalid_zip")
        gender = q.get("gender", "").strip().upper() or None
        if gender not in (None, "M", "F"):
            raise errors.ApiError(400, errors.INVALID_GENDER, error="invalid_input")
        min_age, max_age = _whole(call, "min_age"), _whole(call, "max_age")
        if min_age is not None and max_age is not None and min_age > max_age:
            raise errors.ApiError(400, errors.AGE_RANGE, error="invalid_input")
        page = _whole(call, "page", low=1, message=errors.INVALID_PAGE) or 1
        limit = _whole(call, "limit", low=1, high=100, message=errors.INVALID_LIMIT) or 15
        income = q.get("income", "").strip() or None
        call.require({"ownership": 1})
        everyone = people.by_zip(zip5, gender=gender, min_age=min_age, max_age=max_age, income=income)
        records = _found(call, everyone[(page - 1) * limit: page * limit], errors.OWNERSHIP_ZIP_NO_DATA)
    except errors.ApiError as err:
        raise _owner_error(err, zip=q.get("zip", "")) from None
    filters = {k: v for k, v in (("gender", gender), ("min_age", min_age), ("max_age", max_age), ("income", income))
               if v is not None}
    narrowing = {k: q[k] for k in ("include", "variant") if k in q}
    return ok({"zip": zip5, "filters": filters, "page": page, "limit": limit, "count": len(records),
               "total": len(everyone), "records": records, **narrowing, "error": ""}, stamp=False)
