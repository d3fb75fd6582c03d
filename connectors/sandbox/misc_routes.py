"""Plates (v1, v2, US), year/make/model options and lookup, images, plate recognition, VIN OCR, OBD codes.

The last four follow the vendor's SDKs (the spec shows no path): POST /platerecognition and
POST /v1/vinocr take the image as `image` (npm SDK) or `upload_url` (Python SDK);
GET /obdcodesdecoder?code= and GET /v1/ymm?year=&make=&model=[&trim=].
"""
from __future__ import annotations

import json
import re
from typing import Any

from . import errors, obd as obd_codes, options, plates, ymm
from .calls import Call, ok
from .vehicles import now_iso, specs as specs_data

US_PLATE_CREDITS = 5
_YEAR = re.compile(r"^[0-9]{4}$")


async def plate_v2(request):
    call = Call(request)
    call.authorize()
    q = call.query
    plate = plates.normalize_plate(q.get("plate"))
    country = (q.get("country") or "US").strip().upper()
    state = (q.get("state") or "").strip().upper() or None
    plates.check_region(country, state)
    echo = {"plate": plate, "state": state or "", "country": country, **call.input("district", "require_vin")}
    if country == "US" and not state:
        call.require({"plate-decoder": 1})
        hits = plates.fanout_hits(plate)
        if not hits:
            raise errors.ApiError(404, errors.NO_PLATE_DATA)
        call.charge({"plate-decoder": len(hits)}, bulk=True)
        results = [{"state": s, **found} for s, found in hits]
        return ok({"input": echo, "results": results, "count": len(results), "billed_credits": len(hits)})
    units = 2 if country == "ES" and q.get("require_vin", "").lower() in ("true", "1") else 1
    call.require({"plate-decoder": units})
    found = plates.lookup(country, state or "", plate)
    if found is None:
        raise errors.ApiError(404, errors.NO_PLATE_DATA)
    call.charge({"plate-decoder": units})
    return ok({"input": echo, **found})


def _us_plate_and_state(q) -> tuple[str, str]:
    """The US-only decoders' shared validation: a plate, and a known two-letter state."""
    plate = plates.normalize_plate(q.get("plate"))
    state = (q.get("state") or "").strip().upper()
    if not state:
        raise errors.ApiError(400, errors.MISSING_STATE)
    if state not in plates.US_PLATE_STATES:
        raise errors.ApiError(404, errors.INVALID_STATE_OR_COUNTRY)
    return plate, state


async def plate_us(request):
    call = Call(request)
    call.authorize()
    q = call.query
    plate, state = _us_plate_and_state(q)
    decode_vin = q.get("decodeVIN", "").lower() in ("true", "1")
    charges = {"plate-decoder": US_PLATE_CREDITS, **({"specs": 1} if decode_vin else {})}
    call.require(charges)
    found = plates.lookup("US", state, plate)
    if found is None:
        # README: the upstream has no answer for this plate; not retryable.
        raise errors.ApiError(404, errors.COULD_NOT_FETCH)
    call.charge(charges)
    body = {"input": {"plate": plate, "state": state}, **{k: v for k, v in found.items()
                                                          if k not in ("style", "assembly")}}
    if decode_vin:
        body["vehicle_specs"] = {"success": True, "input": {"vin": found["vin"]}, **specs_data(found["vin"])}
    return ok(body)


async def plate_v1(request):
    """Legacy v1 plate decoder: US only, flat capitalised fields."""
    call = Call(request)
    call.authorize()
    q = call.query
    plate, state = _us_plate_and_state(q)
    call.require({"plate-decoder": 1})
    found = plates.lookup("US", state, plate)
    if found is None:
        raise errors.ApiError(404, errors.NO_PLATE_DATA)
    call.charge({"plate-decoder": 1})
    return ok({"input": {"plate": plate, "state": state}, **plates.legacy_fields(found)}, xml=call.wants_xml())


async def ymm_options(request):
    call = Call(request)
    call.authorize()
    q = call.query
    year_raw, make, model = q.get("year") or None, q.get("make") or None, q.get("model") or None
    dimension = options.resolve_dimension(q.get("dimension") or None, year_raw, make, model)
    try:
        year = int(year_raw) if year_raw else None
    except ValueError:
        year = -1  # matches nothing: an empty layer, as an unknown make does
    values, model_count = options.options(dimension, year, make, model, q.get("trim"))
    per_model = dimension == "variants" and year_raw and make and not model
    units = max(model_count, 1) if per_model else 1
    call.charge({"ymm-options": units}, bulk=bool(per_model))
    body: dict[str, Any] = {"input": {k: v for k, v in (("year", year_raw), ("make", make), ("model", model)) if v},
                            dimension: values}
    if per_model:
        body["modelCount"] = model_count
    return ok(body)


async def images(request):
    """Legacy root route: a missing make or model answers 500, as the real one does."""
    call = Call(request)
    call.authorize()
    q = call.query
    make, model = (q.get("make") or "").strip(), (q.get("model") or "").strip()
    if not make or not model:
        raise errors.ApiError(500, errors.MISSING_MAKE_MODEL)
    options.check_image_filters(q)
    call.require({"images": 1})
    found = options.images(make, model, q)
    if not found:
        raise errors.ApiError(404, errors.NO_IMAGES)
    call.charge({"images": 1})
    query = {k: v for k, v in q.items() if k not in ("key", "source")}  # `source`: the SDKs' tag, not a filter
    query.setdefault("format", "json")
    return ok({"images": found, "query": query}, xml=call.wants_xml(), stamp=False)


async def _image_body(request) -> object:
    try:
        body = json.loads(await request.text() or "null")
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    return body.get("image") if body.get("image") is not None else body.get("upload_url")


async def plate_recognition(request):
    call = Call(request)
    call.authorize()
    image = options.check_image_input(await _image_body(request))
    call.require({"plate-recognition": 1})
    found = options.recognize_plates(image)
    call.charge({"plate-recognition": 1})
    return ok(found)


async def vin_ocr(request):
    call = Call(request)
    call.authorize()
    image = options.check_image_input(await _image_body(request))
    call.require({"vin-ocr": 1})
    found = options.recognize_vin(image)
    call.charge({"vin-ocr": 1})
    return ok(found)


async def obd(request):
    call = Call(request)
    call.authorize()
    code = obd_codes.normalize(call.query.get("code"))
    if not code:
        raise errors.ApiError(400, errors.MISSING_OBD_CODE)
    call.require({"obd": 1})
    diagnosis = obd_codes.diagnosis(code)
    if diagnosis is None:
        raise errors.ApiError(404, errors.obd_not_found(code))
    call.charge({"obd": 1})
    return ok({"code": code, "diagnosis": diagnosis, "date": now_iso()})


async def year_make_model(request):
    call = Call(request)
    call.authorize()
    q = call.query
    year, make, model = (q.get(n, "").strip() for n in ("year", "make", "model"))
    if not (year and make and model) or not _YEAR.match(year):
        raise errors.ApiError(400, errors.MISSING_YMM)
    call.require({"ymm": 1})
    found = ymm.lookup(int(year), make, model, q.get("trim"))
    if found is None:
        raise errors.ApiError(404, errors.NO_YMM_DATA)
    call.charge({"ymm": 1})
    return ok({"input": {"year": year, "make": make, "model": model, **call.input("trim")}, **found})
