"""Recall campaigns: a pool per (year, make, model), and each VIN's open recalls as a subset of it.

`/v1/recalls`, `/v1/recalls-ymm` and batch results all read from here, so they agree:
a batch result's recallCount is len(/v1/recalls recalls) for that VIN.
"""
from __future__ import annotations

import datetime as dt
import uuid
from functools import lru_cache

from . import catalog, control
from .vehicles import digest, rng, vehicle

_COMPONENTS = [
    ("AIR BAGS", "The frontal air bag inflator may rupture during deployment.",
     "An inflator rupture may result in sharp metal fragments striking occupants, increasing the risk of injury.",
     "Dealers will replace the air bag inflator, free of charge."),
    ("FUEL SYSTEM, GASOLINE", "The fuel pump may fail, causing the engine to stall.",
     "An engine stall while driving increases the risk of a crash.",
     "Dealers will replace the fuel pump, free of charge."),
    ("ELECTRICAL SYSTEM", "A software error may cause the rearview camera image to not display.",
     "A rearview camera that does not display an image reduces the driver's rear visibility.",
     "Dealers will update the software, free of charge. An over-the-air update is also available."),
    ("SERVICE BRAKES, HYDRAULIC", "The brake master cylinder may leak fluid.",
     "Reduced braking performance increases the risk of a crash.",
     "Dealers will replace the brake master cylinder, free of charge."),
    ("STEERING", "The steering column bolts may loosen over time.",
     "Loss of steering control increases the risk of a crash.",
     "Dealers will inspect and tighten the bolts, free of charge."),
    ("ENGINE AND ENGINE COOLING", "An oil leak near the exhaust may lead to an engine compartment fire.",
     "A fire increases the risk of injury.",
     "Dealers will replace the oil seal, free of charge. Owners are advised to park outside until repaired."),
    ("SEAT BELTS", "The rear seat belt buckle may not latch properly.",
     "An unlatched seat belt will not restrain an occupant in a crash.",
     "Dealers will replace the buckle assembly, free of charge."),
]


def _canonical(make: str, model: str) -> tuple[str, str]:
    make_name = catalog.MAKE_BY_LOWER.get(make.strip().lower(), make.strip().upper())
    for name, *_ in catalog.MODELS.get(make_name, []):
        if name.lower() == model.strip().lower():
            return make_name, name
    return make_name, model.strip().upper()


@lru_cache(maxsize=16384)
def campaign_pool(year: int, make: str, model: str) -> tuple[dict, ...]:
    """All campaigns of a year/make/model; case-insensitive in make and model."""
    make, model = _canonical(make, model)
    key = (year, make.lower(), model.lower())
    r = rng("recall-pool", *key)
    if r.random() < 0.2 or not 1960 <= year <= 2027:  # no campaigns for years nobody built cars in
        return ()
    manufacturer = next((m for wmi, (mk, m, _) in catalog.WMI.items() if mk == make), f"{make} Motors")
    pool = []
    for i in range(1 + r.randrange(4)):
        component, summary, consequence, remedy = _COMPONENTS[(digest(*key, i) >> 3) % len(_COMPONENTS)]
        received = dt.date(min(year + r.randrange(4), 2026), 1 + r.randrange(12), 1 + r.randrange(28))
        received = min(received, dt.date(2026, 10, 31))
        pool.append({
            "nhtsa_campaign_number": f"{received.year % 100:02d}V{100 + digest(*key, i, 'n') % 900:03d}000",
            "manufacturer": manufacturer,
            "park_it": component == "AIR BAGS" and r.random() < 0.3,
            "park_outside": component == "ENGINE AND ENGINE COOLING",
            "over_the_air_update": component == "ELECTRICAL SYSTEM",
            "report_received_date": f"{received.day:02d}/{received.month:02d}/{received.year:04d}",
            "component": component,
            "summary": f"{manufacturer} is recalling certain {year} {make} {model} vehicles. {summary}",
            "consequence": consequence,
            "remedy": remedy,
            "notes": None if r.random() < 0.5 else "Owners may also contact the NHTSA Vehicle Safety Hotline.",
        })
    return tuple(pool)


@lru_cache(maxsize=65536)
def open_recalls(vin: str) -> tuple[dict, ...]:
    """A deterministic subset of the VIN's pool; about a third of VINs have at least one."""
    v = vehicle(vin)
    pool = campaign_pool(v.year, v.make, v.model)
    r = rng(vin, "recalls")
    if not pool or r.randrange(100) >= 42:
        return ()
    chosen = [c for c in pool if r.random() < 0.6] or [pool[0]]
    return tuple(chosen)


@lru_cache(maxsize=65536)
def recall_report(vin: str) -> dict:
    """Cached: callers must not mutate the answer."""
    v = vehicle(vin)
    recalls = open_recalls(vin)
    return {"uuid": str(uuid.UUID(int=digest(vin, "uuid") << 64 | digest(vin, "uuid2"))),
            "vin": vin, "manufacturer": v.manufacturer, "model_year": str(v.year), "make": v.make,
            "model": v.model, "recall_count": len(recalls), "has_recalls": bool(recalls),
            "recalls": list(recalls)}


def ymm_report(year: int, make: str, model: str) -> dict:
    canonical_make, canonical_model = _canonical(make, model)
    pool = campaign_pool(year, canonical_make, canonical_model)
    return {"make": canonical_make, "model": canonical_model, "model_year": str(year),
            "recall_count": len(pool), "has_recalls": bool(pool), "recalls": list(pool)}


def batch_result(vin: str, override: dict | None = None) -> dict:
    count = len(control.recalls(vin, override, open_recalls(vin))) if vehicle(vin).has_data else 0
    return {"vin": vin, "hasRecalls": count > 0, "recallCount": count}
