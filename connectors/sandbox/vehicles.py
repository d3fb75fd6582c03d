"""Deterministic synthetic vehicles: every answer is a pure function of the VIN (or plate, phone...).

Randomness comes from sha256 of the input, never from Python's hash(), so answers survive
restarts and machines. Derived records are cached; handlers stay cheap.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import random
import re
from dataclasses import dataclass
from functools import lru_cache

from . import catalog, errors

VIN_CHARS = "ABCDEFGHJKLMNPRSTUVWXYZ0123456789"
_VIN_RE = re.compile(r"^[A-HJ-NPR-Z0-9]{17}$")
# Position-10 year code: A..T = 2010..2026 (2010 cycle); V..Y = 1997..2000 and 1..9 = 2001..2009.
_YEAR_CODES = "ABCDEFGHJKLMNPRST"
_OLD_CODES = {"V": 1997, "W": 1998, "X": 1999, "Y": 2000, **{str(d): 2000 + d for d in range(1, 10)}}
NO_DATA_PERCENT = 3
NO_LIEN_THEFT_PERCENT = 60
# The VIN the spec's examples (and openapi.yaml) use: it has data on every endpoint.
EXAMPLE_VIN = "1HGCM82633A004352"

# The vendor SDK READMEs' example VINs (PyPI `carsxe`, npm `carsxe-api`) have data too, so every
# example there runs against the sandbox as written.
SDK_EXAMPLE_VINS = frozenset({"WBAFR7C57CC811956", "WF0MXXGBWM8R43240", "1C4JJXR64PW696340", "2C3CDXFG1FH762860",
                              "1FT8X3BT0BEA61538", "1HGBH41JXMN109186", "5YJSA1E26HF000001"})

# Test VINs: the last six characters pick a fixed answer on every VIN endpoint.
MAGIC_SERIALS = {"000404": 404, "000500": 500, "000501": "CV", "000502": 502, "000503": 503, "000504": 504}


def digest(*parts: object) -> int:
    text = "|".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def rng(*parts: object) -> random.Random:
    return random.Random(digest(*parts))


def validate_vin(raw: str | None) -> str:
    """The VIN endpoints' 400s: missing, wrong length, invalid characters."""
    if raw is None or raw.strip() == "":
        raise errors.ApiError(400, errors.MISSING_VIN)
    vin = raw.strip().upper()
    if len(vin) != 17:
        raise errors.ApiError(400, errors.WRONG_VIN_LENGTH)
    if not _VIN_RE.match(vin):
        raise errors.ApiError(400, errors.INVALID_VIN)
    return vin


def is_valid_vin(vin: str) -> bool:
    return bool(_VIN_RE.match(vin))


def model_year(vin: str) -> int:
    code = vin[9]
    if code in _YEAR_CODES:
        return 2010 + _YEAR_CODES.index(code)
    if code in _OLD_CODES:
        return _OLD_CODES[code]
    return 2005 + digest(vin, "year") % 20


def is_international(vin: str) -> bool:
    return vin[0] not in "12345"


@dataclass(frozen=True)
class Vehicle:
    vin: str
    year: int
    make: str
    manufacturer: str
    made_in: str
    model: str
    body: str
    trim: str
    msrp: int
    engine: str
    cylinders: str
    fuel_type: str
    has_data: bool


def magic_status(vin: str):
    return MAGIC_SERIALS.get(vin[-6:])


@lru_cache(maxsize=65536)
def vehicle(vin: str) -> Vehicle:
    h = digest(vin)
    make, manufacturer, made_in = catalog.WMI.get(vin[:3]) or _fallback_make(vin)
    year = model_year(vin)
    models = [m for m in catalog.MODELS[make] if m[2] <= year] or catalog.MODELS[make]
    name, body, _start, base_msrp, trims = models[h % len(models)]
    trim = trims[(h >> 8) % len(trims)]
    r = rng(vin, "engine")
    if make in catalog.ELECTRIC_MAKES:
        engine, cylinders, fuel = "Electric Motor", "0", "Electric"
    else:
        engine, cylinders, fuel = r.choice(catalog.ENGINES[body])
    msrp = int(base_msrp * (1 + trims.index(trim) * 0.08) * (0.95 + r.random() * 0.1)) // 10 * 10
    has_data = ((h >> 16) % 100 >= NO_DATA_PERCENT or vin in SDK_EXAMPLE_VINS) and magic_status(vin) != 404
    return Vehicle(vin, year, make, manufacturer, made_in, name, body, trim, msrp, engine, cylinders, fuel,
                   has_data)


def _fallback_make(vin: str) -> tuple[str, str, str]:
    """Unknown WMI: pick a make of the same region so the answer still looks plausible."""
    pool = [v for k, v in catalog.WMI.items() if (k[0] in "12345") == (vin[0] in "12345")]
    return pool[digest(vin[:3]) % len(pool)]


def require_data(vin: str, message: str = errors.NO_DATA) -> Vehicle:
    v = vehicle(vin)
    if not v.has_data:
        raise errors.ApiError(404, message)
    return v


def raise_magic(vin: str, *, cv_code: str = "CV-001", unavailable: str | None = None) -> None:
    """Test VINs (see MAGIC_SERIALS) answer a fixed upstream failure; nothing is billed."""
    status = magic_status(vin)
    if status is None or status == 404:
        return
    if status == "CV":
        raise errors.ApiError(500, errors.CV_002 if cv_code == "CV-002" else errors.CV_001)
    if status == 503 and unavailable:
        raise errors.upstream_error(503, unavailable)
    raise errors.upstream_error(status)


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


@lru_cache(maxsize=65536)
def specs(vin: str, deepdata: bool = False) -> dict:
    v = vehicle(vin)
    r = rng(vin, "specs")
    doors = {"Coupe": "2", "Pickup": "4", "Hatchback": "5", "Minivan": "5"}.get(v.body, "4")
    drivetrain = r.choice(["FWD", "AWD", "RWD", "4WD"] if v.body in ("SUV", "Pickup") else ["FWD", "AWD", "RWD"])
    transmission = "1-Speed Automatic" if v.fuel_type == "Electric" else r.choice(
        ["6-Speed Automatic", "8-Speed Automatic", "10-Speed Automatic", "CVT", "6-Speed Manual"])
    attributes = {
        "year": str(v.year), "make": v.make, "model": v.model, "trim": v.trim,
        "style": f"{v.trim} {doors}dr {v.body}", "type": _vehicle_type(v.body), "made_in": v.made_in,
        "doors": doors, "fuel_type": v.fuel_type, "engine": v.engine, "engine_cylinders": v.cylinders,
        "transmission": transmission, "drivetrain": drivetrain,
    }
    colors = ([{"category": "Exterior", "name": c} for c in r.sample(catalog.COLORS["Exterior"], 3)]
              + [{"category": "Interior", "name": c} for c in r.sample(catalog.COLORS["Interior"], 2)])
    equipment = {name: r.choices(["Std.", "Opt.", "N/A"], weights=[6, 3, 1])[0] for name in catalog.EQUIPMENT}
    warranties = [
        {"type": "Basic", "miles": "36,000", "months": "36"},
        {"type": "Powertrain", "miles": r.choice(["60,000", "100,000"]), "months": r.choice(["60", "120"])},
        {"type": "Rust", "miles": "Unlimited", "months": r.choice(["60", "72"])},
    ]
    result = {"attributes": attributes, "colors": colors, "equipment": equipment, "warranties": warranties}
    if deepdata:
        result["deepdata"] = {"plant": f"{v.made_in} plant {vin[10]}", "gvwr": f"{4000 + r.randrange(3000)} lbs",
                              "msrp": str(v.msrp)}
    return result


def _vehicle_type(body: str) -> str:
    return {"Pickup": "Truck", "SUV": "Sport Utility Vehicle", "Minivan": "Van"}.get(body, "Passenger Car")


@lru_cache(maxsize=65536)
def international(vin: str) -> dict:
    v = vehicle(vin)
    r = rng(vin, "intl")
    return {"vin": vin, "vid": str(digest(vin, "vid") % 10**9), "make": v.make, "model": v.model,
            "year": str(v.year), "manufacturer": v.manufacturer, "country": v.made_in,
            "body": v.body, "engine": v.engine, "fuel_type": v.fuel_type,
            "plant": f"{v.made_in} {vin[10]}", "doors": str(r.choice([3, 4, 5]))}


@lru_cache(maxsize=65536)
def history(vin: str) -> dict:
    v = vehicle(vin)
    r = rng(vin, "history")
    start = dt.date(v.year, 1 + r.randrange(12), 1 + r.randrange(28))
    titles, odometer, state = [], 0, r.choice(catalog.US_STATES)
    for i in range(1 + r.randrange(4)):
        odometer += 5000 + r.randrange(25000)
        when = min(start + dt.timedelta(days=400 * i + r.randrange(300)), dt.date(2026, 10, 31))
        if r.random() < 0.3:
            state = r.choice(catalog.US_STATES)
        titles.append({"date": when.isoformat(), "state": state, "odometer": odometer,
                       "odometer_unit": "miles", "title_number": f"T{digest(vin, i) % 10**8:08d}",
                       "event": "Title issued" if i else "First title issued"})
    brands, junk, insurance = [], [], []
    if r.random() < 0.08:
        code, name = r.choice([("SALVAGE", "Salvage"), ("FLOOD", "Flood Damage"), ("REBUILT", "Rebuilt"),
                               ("JUNK", "Junk")])
        branded = titles[-1]["date"]
        brands.append({"brand_code": code, "brand_name": name, "date": branded, "state": state})
        insurance.append({"date": branded, "reporting_entity": "Sandbox Mutual Insurance",
                          "disposition": "Total loss", "state": state})
        if code in ("SALVAGE", "JUNK"):
            junk.append({"date": branded, "reporting_entity": "Sandbox Auto Salvage LLC",
                         "disposition": "Sold", "state": state, "intended_for_export": False})
    return {
        "vin": vin,
        "junkAndSalvageInformation": junk,
        "insuranceInformation": insurance,
        "brandsInformation": brands,
        "currentTitleInformation": [titles[-1]],
        "historyInformation": titles,
        "brandsRecordCount": len(brands),
        "vinChanged": r.random() < 0.01,
    }


@lru_cache(maxsize=65536)
def lien_theft(vin: str) -> dict | None:
    v = vehicle(vin)
    r = rng(vin, "lien")
    if r.randrange(100) < NO_LIEN_THEFT_PERCENT and vin != EXAMPLE_VIN:
        return None
    events = []
    for _ in range(1 + r.randrange(3)):
        kind = r.choice(["Lien", "Lien Release", "Theft", "Recovery"])
        when = dt.date(v.year, 1, 1) + dt.timedelta(days=r.randrange(max((2026 - v.year) * 365, 30)))
        state = r.choice(catalog.US_STATES)
        details = [f"Date: {min(when, dt.date(2026, 10, 31)).isoformat()}"]
        if kind.startswith("Lien"):
            details.append(f"Lienholder: {r.choice(['Sandbox Credit Union', 'Example Auto Finance', 'Test Bank N.A.'])}")
        else:
            details.append(f"Agency: {state} State Police")
        events.append({"event": kind, "location": state, "details_list": details})
    return {"year": v.year, "make": v.make, "model": v.model, "type": _vehicle_type(v.body), "events": events}


_FIRST = ["James", "Mary", "Robert", "Patricia", "John", "Jennifer", "Michael", "Linda", "David", "Elena"]
_LAST = ["Smith", "Johnson", "Garcia", "Miller", "Davis", "Rodriguez", "Martinez", "Lee", "Walker", "Young"]
_CITIES = [("Austin", "TX", "78701"), ("Columbus", "OH", "43215"), ("Denver", "CO", "80202"),
           ("Tampa", "FL", "33602"), ("Portland", "OR", "97204"), ("Raleigh", "NC", "27601")]


def owner(seed: str, index: int, vin: str | None = None) -> dict:
    r = rng(seed, "owner", index)
    city, state, zip_code = r.choice(_CITIES)
    first, last = r.choice(_FIRST), r.choice(_LAST)
    v = vehicle(vin) if vin else None
    return {
        "record_id": f"own_{digest(seed, index) % 16**12:012x}",
        "first_name": first, "last_name": last, "age": str(25 + r.randrange(50)),
        "gender": r.choice(["M", "F"]),
        "address": {"street": f"{100 + r.randrange(9000)} {r.choice(['Oak', 'Main', 'Elm', 'Pine'])} St",
                    "city": city, "state": state, "zip": zip_code},
        "demographics": {"marital_status": r.choice(["Married", "Single"]),
                         "home_owner": r.choice(["Yes", "No"]),
                         "children_in_household": r.choice(["Yes", "No"]),
                         "veteran_in_household": r.choice(["Yes", "No"]),
                         "occupation": r.choice(["Professional", "Technical", "Retired", "Sales"]),
                         "income_range": r.choice(["$50,000-$74,999", "$75,000-$99,999", "$100,000+"]),
                         "net_worth_range": r.choice(["$25,000-$49,999", "$100,000-$249,999"]),
                         "credit_range": r.choice(["650-699", "700-749", "750+"])},
        "emails": [{"address": f"{first}.{last}{r.randrange(100)}@example.com".lower(),
                    "last_seen": f"2026-{1 + r.randrange(10):02d}-{1 + r.randrange(28):02d}"}],
        "phones": [{"number": f"{200 + r.randrange(700)}555{r.randrange(10000):04d}",
                    "type": r.choice(["mobile", "landline"]), "dnc": r.random() < 0.2}],
        "vehicle_history": ([{"make": v.make, "model": v.model, "year": v.year, "vin": v.vin}] if v else []),
    }


OWNER_SECTIONS = ("demographics", "emails", "phones", "vehicle_history")


def narrow_owner(record: dict, include: set[str] | None) -> dict:
    if include is None:
        return record
    return {k: v for k, v in record.items() if k not in OWNER_SECTIONS or k in include}


@lru_cache(maxsize=65536)
def ownership(vin: str) -> tuple[dict, list[dict]] | None:
    """(vehicle, owners) or None when no ownership record exists (about a quarter of VINs)."""
    v = vehicle(vin)
    r = rng(vin, "ownership")
    if not v.has_data or r.randrange(100) < 25:
        return None
    s = specs(vin)["attributes"]
    vehicle_info = {"make": v.make, "model": v.model, "manufacturer": v.manufacturer, "fuel_type": v.fuel_type,
                    "drive_type": s["drivetrain"], "transmission_type": s["transmission"], "body_type": v.body,
                    "body_subtype": s["style"], "vehicle_class": _vehicle_type(v.body), "size": "Midsize",
                    "vehicle_type": "Passenger" if v.body != "Pickup" else "Truck",
                    "year": v.year, "doors": int(s["doors"]), "engine_cylinders": int(v.cylinders)}
    owners = [owner(vin, i, vin) for i in range(1 + r.randrange(3))]
    return vehicle_info, owners


def phone_owners(phone: str) -> list[dict]:
    """Half of the numbers hit one or two owners."""
    r = rng(phone, "phone")
    if r.random() < 0.5:
        return []
    return [owner(phone, i, synthetic_vin(f"phone:{phone}:{i}")) for i in range(1 + (r.random() < 0.2))]


def synthetic_vin(seed: str, *, us_only: bool = True) -> str:
    """A valid VIN with data, derived from seed (used for plates and phone matches)."""
    wmis = [w for w in catalog.WMI if (w[0] in "12345") or not us_only]
    for attempt in range(50):
        r = rng(seed, "vin", attempt)
        body = "".join(r.choice(VIN_CHARS) for _ in range(6))
        year_code = r.choice(_YEAR_CODES[4:])
        vin = (r.choice(wmis) + body + year_code + r.choice(VIN_CHARS) + f"{r.randrange(1, 999999):06d}")
        if vin[0] in "12345":  # a real decoder answers real VINs: North American ones pass their check digit
            vin = vin[:8] + _check_digit(vin) + vin[9:]
        if vin[-6:] not in MAGIC_SERIALS and vehicle(vin).has_data:
            return vin
    raise AssertionError("unreachable: 50 misses at 3% each")


_VALUES = {**{str(d): d for d in range(10)}, **dict(zip("ABCDEFGH", range(1, 9))), **dict(zip("JKLMN", range(1, 6))),
           "P": 7, "R": 9, **dict(zip("STUVWXYZ", range(2, 10)))}
_WEIGHTS = (8, 7, 6, 5, 4, 3, 2, 10, 0, 9, 8, 7, 6, 5, 4, 3, 2)


def _check_digit(vin: str) -> str:
    """Position 9 of a North American VIN (49 CFR 565): weighted sum of the others, modulo 11, 10 as X."""
    remainder = sum(_VALUES[c] * w for c, w in zip(vin, _WEIGHTS)) % 11
    return "X" if remainder == 10 else str(remainder)
