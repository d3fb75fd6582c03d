"""Market values: v2 (per-condition groups, mileage bands, regional adjustment) and v1 (single figures)."""
from __future__ import annotations

import datetime as dt
from functools import lru_cache

from . import errors
from .vehicles import digest, rng, vehicle

CONDITIONS = {"excellent": "xclean", "clean": "clean", "average": "avg", "rough": "rough"}
_TIERS = {"whole": ("xclean", "clean", "avg", "rough"), "retail": ("xclean", "clean", "avg", "rough"),
          "trade_in": ("clean", "avg", "rough")}
_TIER_FACTOR = {"xclean": 1.06, "clean": 1.0, "avg": 0.92, "rough": 0.8}
_KIND_FACTOR = {"whole": 0.9, "retail": 1.0, "trade_in": 0.82}
MILES_PER_YEAR = 12000
BAND_WIDTH = 10000


def parse_condition(raw: str | None) -> str | None:
    if raw is None or raw == "":
        return None
    tier = CONDITIONS.get(raw.strip().lower())
    if tier is None:
        raise errors.ApiError(400, errors.INVALID_CONDITION)
    return tier


def parse_mileage(raw: str | None) -> float | None:
    if raw is None or raw == "":
        return None
    try:
        miles = float(raw)
    except ValueError:
        raise errors.ApiError(400, errors.INVALID_MILEAGE) from None
    if miles != miles or miles < 0 or miles == float("inf"):
        raise errors.ApiError(400, errors.INVALID_MILEAGE)
    return miles


def _age(year: int) -> int:
    return max(dt.date.today().year - year, 0)


@lru_cache(maxsize=65536)
def base_retail(vin: str) -> int:
    """MSRP depreciated by age: older is cheaper, never below a floor."""
    v = vehicle(vin)
    value = v.msrp * (0.85 ** _age(v.year)) * (0.95 + (digest(vin, "value") % 100) / 1000)
    return max(int(value) // 25 * 25, 1500)


def regional_factor(state: str | None) -> float:
    if not state:
        return 0.0
    return ((digest("region", state.upper()) % 61) - 30) / 1000  # -3% .. +3%


@lru_cache(maxsize=65536)
def mileage_list(vin: str) -> tuple[dict, ...]:
    v = vehicle(vin)
    expected = max(_age(v.year), 1) * MILES_PER_YEAR
    retail = base_retail(vin)
    bands = []
    category = _mileage_cat(v.body)
    for start in range(0, 300000, BAND_WIDTH):
        # Below the expected mileage adds value, above it deducts, bounded to +-40% of retail.
        delta = (expected - (start + BAND_WIDTH / 2)) / 1000 * 0.004 * retail
        delta = max(min(delta, 0.25 * retail), -0.4 * retail)
        band = {"model_year": str(v.year), "range_begin": start + (1 if start else 0),
                "range_end": start + BAND_WIDTH, "mileage_cat": category}
        for tier in ("xclean", "clean", "avg", "rough"):
            band[tier] = int(delta * _TIER_FACTOR[tier])
        band["finadv"] = int(delta * 0.9)
        bands.append(band)
    return tuple(bands)


def _mileage_cat(body: str) -> str:
    return {"Pickup": "T", "SUV": "U"}.get(body, "C")


def _band(vin: str, miles: float) -> dict:
    bands = mileage_list(vin)
    for band in bands:
        if band["range_begin"] <= miles <= band["range_end"]:
            return band
    return bands[-1] if miles > bands[-1]["range_end"] else bands[0]


@lru_cache(maxsize=65536)
def _add_deducts(vin: str) -> tuple[dict, ...]:
    r = rng(vin, "options")
    items = []
    for uoc, name, price in (("NAV", "Navigation System", 400), ("SRF", "Power Sunroof", 650),
                             ("LTH", "Leather Seats", 500), ("3RD", "Third Row Seat", 450)):
        if r.random() < 0.5:
            resid = {f"resid{m}": round(price * (0.9 - m / 100), 2) for m in (12, 24, 30, 36, 42, 48, 60, 72)}
            items.append({"uoc": uoc, "name": name, "xclean": price, "clean": price,
                          "avg": int(price * 0.85), "rough": int(price * 0.6), "auto": "N", **resid})
    return tuple(items)


@lru_cache(maxsize=16384)
def market_value_v2(vin: str, state: str | None, miles: float | None, tier: str | None, factor: float = 1.0) -> dict:
    """Cached: callers must not mutate the answer. `factor` moves every value (sandbox control)."""
    v = vehicle(vin)
    r = rng(vin, "mv2")
    retail = int(base_retail(vin) * factor)
    region = regional_factor(state)
    band = _band(vin, miles) if miles is not None and tier is not None else None
    result: dict = {
        "uid": str(digest(vin, "uid") % 10**7), "publish_date": dt.date.today().replace(day=1).isoformat(),
        "data_freq": "M", "state": (state or "").upper(), "country": "US",
        "uvc": f"{v.year}{digest(v.make, v.model) % 10**6:06d}", "group_num": str(digest(v.model) % 9000 + 1000),
        "model_year": str(v.year), "make": v.make, "model": v.model, "series": v.trim,
        "style": f"{v.body} {v.trim}", "mileage_cat": _mileage_cat(v.body),
        "class_code": str(digest(v.body) % 90 + 10), "class_name": v.body,
        "description_score": str(70 + r.randrange(30)), "risk_score": str(1 + r.randrange(9)),
        "price_includes": "AT AC", "tire_size": f"{215 + 10 * r.randrange(5)}/{55 + 5 * r.randrange(3)}R{16 + r.randrange(4)}",
        "seat_cap": "7" if v.body == "Minivan" else "5", "fuel_type": v.fuel_type,
        "fuel_cap": "0" if v.fuel_type == "Electric" else str(12 + r.randrange(14)),
        "fuel_delivery": "N/A" if v.fuel_type == "Electric" else "Direct Injection",
        "hwy_mpg": str(24 + r.randrange(16)), "city_mpg": str(18 + r.randrange(12)),
        "engine_description": v.engine, "cylinders": v.cylinders,
        "engine_displacement": v.engine.split("L")[0] if "L" in v.engine else "0",
        "base_hp": str(140 + r.randrange(260)), "torque": str(130 + r.randrange(300)),
        "drivetrain": r.choice(["FWD", "AWD", "RWD"]), "num_gears": str(r.choice([6, 8, 10])),
        "ext_doors": "2" if v.body == "Coupe" else "4", "airbags": "Front, Side, Curtain",
        "anti_corrosion_warranty": "5/Unlimited", "basic_warranty": "3/36000", "road_assist_warranty": "3/36000",
        "first_values_flag": _age(v.year) == 0,
        "msrp": v.msrp, "retail_equipped": retail, "wheel_base": round(100 + r.random() * 30, 1),
        "taxable_hp": round(20 + r.random() * 20, 1),
    }
    for i in range(2, 7):
        result[f"region{i}"] = int(retail * (1 + regional_factor(f"R{i}")))
    add_deducts = _add_deducts(vin)
    for kind, tiers in _TIERS.items():
        for t in tiers:
            base = int(retail * _KIND_FACTOR[kind] * _TIER_FACTOR[t])
            add_deduct = int(sum(item[t] for item in add_deducts if kind != "trade_in") // 2 * factor)
            regional = int(base * region)
            mileage = int(band[t] * factor) if band is not None and t == tier else 0
            result[f"{kind}_{t}"] = {
                f"base_{kind}_{t}": base, f"mileage_{kind}_{t}": mileage,
                f"add_deduct_{kind}_{t}": add_deduct, f"regional_{kind}_{t}": regional,
                f"adjusted_{kind}_{t}": base + mileage + add_deduct + regional,
            }
    result.update({
        "retail": result["retail_clean"]["adjusted_retail_clean"],
        "trade_in": result["trade_in_clean"]["adjusted_trade_in_clean"],
        "rough_trade_in": result["trade_in_rough"]["adjusted_trade_in_rough"],
        "average_trade_in": result["trade_in_avg"]["adjusted_trade_in_avg"],
        "loan_value": int(result["trade_in_clean"]["adjusted_trade_in_clean"] * 0.9),
        "add_deduct_list": list(add_deducts),
        "mileage_list": list(mileage_list(vin)),
        "model_number_list": [f"{v.model[:3].upper()}{digest(vin, 'mn') % 1000:03d}"],
        "trade_in_values": _trade_in_history(vin, result["trade_in_clean"]["adjusted_trade_in_clean"]),
        "auction_values": _auction(vin, retail, snake=True),
    })
    return result


def _trade_in_history(vin: str, current: int) -> list[dict]:
    """Monthly trade-in values for the last six months, a little higher the further back."""
    today = dt.date.today()
    out = []
    for months_ago in range(6, 0, -1):
        index = today.year * 12 + today.month - 1 - months_ago
        out.append({"date": f"{index // 12}-{index % 12 + 1:02d}-01T00:00:00Z",
                    "value": str(int(current * (1 + months_ago * 0.01)))})
    return out


def _auction(vin: str, retail: int, *, snake: bool) -> dict:
    low, avg, high = int(retail * 0.72), int(retail * 0.8), int(retail * 0.88)
    today = dt.date.today()
    span = f"{(today - dt.timedelta(days=90)).isoformat()} to {today.isoformat()}"
    if snake:
        return {"low_auction_value": low, "average_auction_value": avg, "high_auction_value": high,
                "date_range": span}
    return {"lowAuctionValue": low, "averageAuctionValue": avg, "highAuctionValue": high, "dateRange": span}


@lru_cache(maxsize=16384)
def market_value_v1(vin: str, factor: float = 1.0) -> dict:
    v2 = market_value_v2(vin, None, None, None, factor)
    return {
        "vin": vin, "retail": str(v2["retail"]), "tradeIn": str(v2["trade_in"]),
        "roughTradeIn": str(v2["rough_trade_in"]), "averageTradeIn": str(v2["average_trade_in"]),
        "loanValue": str(v2["loan_value"]), "msrp": str(v2["msrp"]), "uid": int(v2["uid"]),
        "tradeInValues": v2["trade_in_values"], "auctionValues": _auction(vin, int(base_retail(vin) * factor), snake=False),
    }
