"""`/v1/ymm`: one vehicle by year, make and model (and a trim to match), drawn from the catalog.

Shape after the vendor's own clients (SDK method `year_make_model`; the vendor's MCP server types
name `bestMatch` and `trimOptions`): the best-matching trim with prices, seating, colours and
features, and every trim of that model year.
"""
from __future__ import annotations

from typing import Any

from . import catalog
from .options import LAST_YEAR
from .vehicles import digest, rng

_STANDARD = {
    "Safety": ["ABS brakes", "Stability control", "Front airbags", "Backup camera"],
    "Comfort": ["Air conditioning", "Power windows", "Cruise control"],
}
_OPTIONAL = {"Packages": ["Technology package", "Cold weather package"], "Exterior": ["Sunroof", "Tow hitch"]}


def _rgb(name: str) -> str:
    value = digest("rgb", name) % 16**6
    return f"{value >> 16},{(value >> 8) & 255},{value & 255}"


def lookup(year: int, make: str, model: str, trim: str | None) -> dict | None:
    """(bestMatch, trimOptions) as one dict, or None when the catalog has no such vehicle."""
    canonical = catalog.MAKE_BY_LOWER.get(make.strip().lower())
    found = next((row for row in catalog.MODELS.get(canonical or "", [])
                  if row[0].lower() == model.strip().lower()), None)
    if found is None or not (found[2] <= year <= LAST_YEAR):
        return None
    name, body, _start, msrp, trims = found
    step = (year - found[2]) * 150  # prices drift up by model year
    prices = [msrp + step + i * 2500 for i in range(len(trims))]
    options: list[dict[str, Any]] = [{"name": t, "trim": t, "base_msrp": p, "base_invoice": round(p * 0.93)}
                                     for t, p in zip(trims, prices)]
    needle = (trim or "").strip().lower()
    best = next((o for o in options if needle and o["trim"].lower() == needle), None)
    best = best or next((o for o in options if needle and needle in o["trim"].lower()), options[0])
    r = rng("ymm", year, canonical, name, best["trim"])
    colors = {kind.lower(): [{"name": c, "rgb": _rgb(c)} for c in r.sample(catalog.COLORS[kind], picks)]
              for kind, picks in (("Exterior", 3), ("Interior", 2))}
    match = {
        "make": canonical, "model": name, "year": year, "trim": best["trim"],
        "name": f"{year} {canonical} {name} {best['trim']}",
        "base_msrp": best["base_msrp"], "base_invoice": best["base_invoice"],
        "total_seating": {"Coupe": 4, "Pickup": 5, "Minivan": 8}.get(body, 5 + (body == "SUV" and r.random() < 0.3) * 2),
        "color": colors,
        "features": {
            "standard": [{"category": c, "features": [{"name": f, "value": "Std."} for f in fs]}
                         for c, fs in _STANDARD.items()],
            "optional": [{"category": c, "features": [{"name": f, "price": 500 + r.randrange(20) * 100} for f in fs]}
                         for c, fs in _OPTIONAL.items()],
        },
        "is_truck": body == "Pickup",
        "is_electric": canonical in catalog.ELECTRIC_MAKES,
        "is_plugin_electric": canonical in catalog.ELECTRIC_MAKES,
    }
    return {"bestMatch": match, "trimOptions": options}
