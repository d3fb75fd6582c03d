"""VIN lookups: specifications, international decode, recalls, market value, history, lien/theft.

Each handler runs in the same order: key and plan (401/403), parameters (400, free),
quota/credits (429/402), the lookup (404/5xx, free), then the charge and the answer.
"""
from __future__ import annotations

import re

from . import control, errors, valuation
from .calls import Call, ok
from .recalls import recall_report, ymm_report
from .vehicles import (history as history_data, international, is_international, lien_theft as lien_theft_data,
                       raise_magic, require_data, specs as specs_data, validate_vin)

ONE = 1


def _vin_call(request, api: str, *, gate: str | None = None, cv_code: str = "CV-001") -> tuple[Call, str]:
    call = Call(request)
    call.authorize(gate)
    vin = validate_vin(call.query.get("vin"))
    call.require({api: ONE})
    raise_magic(vin, cv_code=cv_code)
    return call, vin


async def specs(request):
    call, vin = _vin_call(request, "specs")
    q = call.query
    v = require_data(vin, errors.NO_DATA_SPECS)
    echo = {"key": call.key, "vin": vin, **call.input("format", "deepdata", "deepData", "disableIntVINDecoding")}
    # `deepdata` (spec, npm SDK) or `deepData` (Python SDK); `1`, or `true` as SDK users pass it.
    deep = _flag(q.get("deepdata")) or _flag(q.get("deepData"))
    told = call.state.vehicles.get(vin)
    if is_international(vin):
        if _flag(q.get("disableIntVINDecoding")):
            raise errors.ApiError(404, errors.NO_DATA_SPECS)
        call.charge({"specs": ONE})
        answer = control.specs(told, {"attributes": international(v.vin)})
        return ok({"input": echo, **answer}, xml=call.wants_xml())
    call.charge({"specs": ONE})
    return ok({"input": echo, **control.specs(told, specs_data(vin, deep))}, xml=call.wants_xml())


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true")


async def international_decoder(request):
    call, vin = _vin_call(request, "international-vin-decoder")
    require_data(vin)
    call.charge({"international-vin-decoder": ONE})
    return ok({"input": {"vin": vin}, "attributes": international(vin)})


async def recalls(request):
    call, vin = _vin_call(request, "recalls")
    require_data(vin)
    call.charge({"recalls": ONE})
    report = control.recall_report(vin, call.state.vehicles.get(vin), recall_report(vin))
    return ok({"input": {"key": call.key, "vin": vin}, "data": report})


_YEAR = re.compile(r"^\d{4}$")


async def recalls_ymm(request):
    call = Call(request)
    call.authorize("recalls-ymm")
    q = call.query
    year, make, model = q.get("year", "").strip(), q.get("make", "").strip(), q.get("model", "").strip()
    if not (year and make and model) or not _YEAR.match(year):
        raise errors.ApiError(400, errors.MISSING_YMM)
    call.charge({"recalls": ONE})
    return ok({"input": {"year": year, "make": make, "model": model},
               "data": ymm_report(int(year), make, model)})


async def market_value_v2(request):
    call = Call(request)
    call.authorize("market-value-v2")
    q = call.query
    vin = validate_vin(q.get("vin"))
    tier = valuation.parse_condition(q.get("condition"))
    miles = valuation.parse_mileage(q.get("mileage"))
    state = q.get("state", "").strip().upper() or None
    call.require({"market-value": ONE})
    raise_magic(vin)
    require_data(vin)
    call.charge({"market-value": ONE})
    result = valuation.market_value_v2(vin, state, miles, tier, control.value_factor(call.state.vehicles.get(vin)))
    return ok({"input": {"vin": vin, "state": state or "", "country": "US"}, **result})


async def market_value_v1(request):
    """Legacy root route: validation problems answer HTTP 500 with the 400 message (v1 quirk)."""
    call = Call(request)
    call.authorize()
    try:
        vin = validate_vin(call.query.get("vin"))
    except errors.ApiError as err:
        raise errors.ApiError(500, err.message) from None
    call.require({"market-value": ONE})
    raise_magic(vin)
    require_data(vin)
    call.charge({"market-value": ONE})
    factor = control.value_factor(call.state.vehicles.get(vin))
    return ok({"input": {"vin": vin}, **valuation.market_value_v1(vin, factor)}, xml=call.wants_xml())


async def history(request):
    call, vin = _vin_call(request, "history", gate="history", cv_code="CV-002")
    require_data(vin)
    call.charge({"history": ONE})
    return ok(control.history(call.state.vehicles.get(vin), history_data(vin)), xml=call.wants_xml())


async def lien_theft(request):
    call, vin = _vin_call(request, "lien-theft", gate="lien-theft")
    require_data(vin, errors.NO_LIEN_THEFT)
    found = control.lien_theft(vin, call.state.vehicles.get(vin), lien_theft_data(vin))
    if found is None:
        raise errors.ApiError(404, errors.NO_LIEN_THEFT)
    call.charge({"lien-theft": ONE})
    return ok({"input": {"vin": vin}, **found})

