"""Licence plates: each (country, state, plate) maps to a synthetic VIN, so plate answers agree with /specs."""
from __future__ import annotations

from functools import lru_cache

from . import catalog, errors
from .vehicles import digest, specs, synthetic_vin, vehicle

NO_PLATE_PERCENT = 10
FANOUT_HIT_PERCENT = 3
US_PLATE_STATES = set(catalog.US_STATES) | {"PR"}


def normalize_plate(raw: str | None) -> str:
    plate = (raw or "").strip().upper().replace(" ", "").replace("-", "")
    if not plate:
        raise errors.ApiError(400, errors.MISSING_PLATE)
    return plate


def check_region(country: str, state: str | None) -> None:
    """404 'Invalid state or country code.' for unknown codes; 400 when AU/CA lack a state."""
    if country not in catalog.PLATE_COUNTRIES:
        raise errors.ApiError(404, errors.INVALID_STATE_OR_COUNTRY)
    if country in ("AU", "CA") and not state:
        raise errors.ApiError(400, errors.MISSING_STATE)
    if state:
        valid = {"US": US_PLATE_STATES, "AU": set(catalog.AU_STATES), "CA": set(catalog.CA_PROVINCES)}.get(country)
        if valid is not None and state not in valid:
            raise errors.ApiError(404, errors.INVALID_STATE_OR_COUNTRY)


@lru_cache(maxsize=65536)
def lookup(country: str, state: str, plate: str) -> dict | None:
    """The vehicle behind a plate, or None (about 10% of plates are unknown)."""
    if digest("plate", country, state, plate) % 100 < NO_PLATE_PERCENT:
        return None
    vin = synthetic_vin(f"plate:{country}:{state}:{plate}", us_only=country == "US")
    v = vehicle(vin)
    attrs = specs(vin)["attributes"]
    color = specs(vin)["colors"][0]["name"]
    return {
        "description": f"{v.year} {v.make} {v.model} {v.trim}", "make": v.make, "model": v.model,
        "trim": v.trim, "vin": vin, "style": attrs["style"], "year": str(v.year), "assembly": v.made_in,
        "fuel_type": v.fuel_type, "color": color, "body_style": v.body, "engine_size": v.engine,
        "drive_type": attrs["drivetrain"], "transmission": attrs["transmission"],
    }


def fanout_hits(plate: str) -> list[tuple[str, dict]]:
    """US plate without state: every jurisdiction is searched; a few hit."""
    hits = []
    for state in catalog.US_STATES:
        if digest("fanout", state, plate) % 100 < FANOUT_HIT_PERCENT:
            found = lookup("US", state, plate)
            if found:
                hits.append((state, found))
    return hits


def legacy_fields(found: dict) -> dict:
    """The v1 /platedecoder flat shape."""
    return {"Description": found["description"], "CarMake": found["make"], "CarModel": found["model"],
            "RegistrationYear": found["year"], "VIN": found["vin"], "BodyStyle": found["body_style"],
            "EngineSize": found["engine_size"], "Colour": found["color"], "FuelType": found["fuel_type"]}
