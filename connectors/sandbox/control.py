"""Per-VIN overrides: tell a running sandbox that a vehicle changed between two refreshes.

Every answer is otherwise a pure function of the VIN, so nothing ever changes; an override replaces
part of one VIN's answers until it is cleared. Set through `POST /_sandbox/vehicles/{vin}` (or
`Sandbox.set_vehicle`, or `--vehicles FILE` at start, a JSON object keyed by VIN). Each call
replaces only the fields it names:

    recalls       list of campaigns: the VIN's open recalls (per-VIN lookup and batch count agree);
                  each needs `nhtsa_campaign_number`, the other campaign fields are filled in
    value_factor  positive number multiplying the VIN's values (/v2/marketvalue, /marketvalue)
    title_brands  list of brand names: the history report's brandsInformation
    history       object merged over the history report (e.g. {"historyInformation": [...]})
    lien_theft    list of events ({event, location, details_list}), or null for 404 "no data"
    specs         object merged over /specs' attributes (e.g. {"trim": "Sport"})
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from .vehicles import _vehicle_type as vehicle_type
from .vehicles import vehicle

OVERRIDES = ("recalls", "value_factor", "title_brands", "history", "lien_theft", "specs")


class OverrideError(ValueError):
    """An override the sandbox cannot apply; the message says which and why, in one line."""


def validate(body: Any) -> dict[str, Any]:
    """The overrides of one request, checked; raises OverrideError."""
    if not isinstance(body, dict):
        raise OverrideError("the body must be a JSON object of overrides: " + ", ".join(OVERRIDES))
    for name in body:
        if name not in OVERRIDES:
            raise OverrideError(f"unknown override {name!r}; use: {', '.join(OVERRIDES)}")
    factor = body.get("value_factor", 1)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 0:
        raise OverrideError("value_factor must be a positive number (1.2 = 20% more)")
    recalls = body.get("recalls", [])
    if not isinstance(recalls, list) or not all(isinstance(c, dict) and c.get("nhtsa_campaign_number") for c in recalls):
        raise OverrideError("recalls must be a list of campaigns; each recall needs an nhtsa_campaign_number")
    brands = body.get("title_brands", [])
    if not isinstance(brands, list) or not all(isinstance(b, str) and b for b in brands):
        raise OverrideError("title_brands must be a list of brand names, e.g. [\"Salvage\"]")
    events = body.get("lien_theft", [])
    if events is not None and (not isinstance(events, list) or not all(isinstance(e, dict) for e in events)):
        raise OverrideError("lien_theft must be a list of events ({event, location, details_list}) or null")
    for name in ("history", "specs"):
        if not isinstance(body.get(name, {}), dict):
            raise OverrideError(f"{name} must be an object merged over the answer")
    return dict(body)


def campaign(vin: str, given: dict[str, Any]) -> dict[str, Any]:
    """A full campaign from the fields given: what is missing is filled in as the generator would."""
    v = vehicle(vin)
    today = dt.date.today()
    component = given.get("component") or "EQUIPMENT"
    return {
        "manufacturer": v.manufacturer, "park_it": False, "park_outside": False, "over_the_air_update": False,
        "report_received_date": f"{today.day:02d}/{today.month:02d}/{today.year:04d}", "component": component,
        "summary": f"{v.manufacturer} is recalling certain {v.year} {v.make} {v.model} vehicles ({component}).",
        "consequence": "This increases the risk of a crash or injury.",
        "remedy": "Dealers will repair the vehicle, free of charge.", "notes": None,
        **given,
    }


def recalls(vin: str, override: dict[str, Any] | None, generated: tuple[dict, ...]) -> tuple[dict, ...]:
    if not override or "recalls" not in override:
        return generated
    return tuple(campaign(vin, c) for c in override["recalls"])


def value_factor(override: dict[str, Any] | None) -> float:
    return float((override or {}).get("value_factor", 1.0))


def history(override: dict[str, Any] | None, report: dict[str, Any]) -> dict[str, Any]:
    if not override:
        return report
    report = {**report, **override.get("history", {})}
    if "title_brands" in override:
        last = (report.get("currentTitleInformation") or report.get("historyInformation") or [{}])[-1]
        report["brandsInformation"] = [
            {"brand_code": name.upper().replace(" ", "_"), "brand_name": name, "date": last.get("date"),
             "state": last.get("state")} for name in override["title_brands"]]
        report["brandsRecordCount"] = len(report["brandsInformation"])
    return report


def recall_report(vin: str, override: dict[str, Any] | None, report: dict[str, Any]) -> dict[str, Any]:
    if not override or "recalls" not in override:
        return report
    chosen = list(recalls(vin, override, ()))
    return {**report, "recall_count": len(chosen), "has_recalls": bool(chosen), "recalls": chosen}


def lien_theft(vin: str, override: dict[str, Any] | None, report: dict[str, Any] | None) -> dict[str, Any] | None:
    """The lien/theft answer (None: the service's 404 "no data")."""
    if not override or "lien_theft" not in override:
        return report
    if override["lien_theft"] is None:
        return None
    v = vehicle(vin)
    base = report or {"year": v.year, "make": v.make, "model": v.model, "type": vehicle_type(v.body)}
    return {**base, "events": override["lien_theft"]}


def specs(override: dict[str, Any] | None, answer: dict[str, Any]) -> dict[str, Any]:
    if not override or "specs" not in override:
        return answer
    return {**answer, "attributes": {**answer["attributes"], **override["specs"]}}
