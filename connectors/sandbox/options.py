"""Year/make/model option lists, vehicle images, OBD codes and image recognition answers."""
from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping

from . import catalog, errors
from .vehicles import VIN_CHARS, digest, rng, synthetic_vin

DIMENSIONS = ("years", "makes", "models", "trims", "variants")
LAST_YEAR = 2026


def _models(make: str | None, year: int | None, model: str | None):
    makes = [catalog.MAKE_BY_LOWER[make.lower()]] if make else list(catalog.MODELS)
    for mk in makes:
        for name, body, start, _msrp, trims in catalog.MODELS.get(mk, []):
            if year is not None and not (start <= year <= LAST_YEAR):
                continue
            if model and name.lower() != model.lower():
                continue
            yield mk, name, body, start, trims


def resolve_dimension(dimension: str | None, year, make, model) -> str:
    """Rules 1-4 of the spec: one layer, inferred when omitted; the required companions."""
    if dimension is not None and dimension not in DIMENSIONS:
        raise errors.ApiError(400, errors.INVALID_DIMENSION)
    if model and not make and not year:
        raise errors.ApiError(400, errors.YMM_YEAR_FOR_MODEL)
    if dimension is None:
        if make and model:
            # The SDK README: "add `year` for makes, `make` for models, and `model` for variants".
            dimension = "variants" if year else "years"
        elif make:
            dimension = "models"
        elif year:
            dimension = "makes"
        else:
            dimension = "years"
    if dimension == "models" and not make:
        raise errors.ApiError(400, errors.YMM_MAKE_FOR_MODELS)
    if dimension == "trims" and not model:
        raise errors.ApiError(400, errors.YMM_MODEL_FOR_TRIMS)
    if dimension == "variants" and not model and not (year and make):
        raise errors.ApiError(400, errors.YMM_MODEL_FOR_VARIANTS)
    return dimension


def options(dimension: str, year: int | None, make: str | None, model: str | None,
            trim: str | None) -> tuple[list[str], int]:
    """(values, model count); unknown makes give an empty list."""
    if make and make.lower() not in catalog.MAKE_BY_LOWER:
        return [], 0
    rows = list(_models(make, year, model))
    if dimension == "years":
        years = {y for _, _, _, start, _ in rows for y in range(start, LAST_YEAR + 1)}
        return [str(y) for y in sorted(years, reverse=True)], 0
    if dimension == "makes":
        return sorted({mk for mk, *_ in rows}), 0
    if dimension == "models":
        return sorted({name for _, name, *_ in rows}), 0
    needle = (trim or "").lower()
    if dimension == "trims":
        values = [t for _, _, _, _, trims in rows for t in trims]
    else:
        values = [f"{name} {t} {body}" for _, name, body, _, trims in rows for t in trims]
    values = list(dict.fromkeys(v for v in values if needle in v.lower()))
    return values, len({name for _, name, *_ in rows})


ANGLES = ("front", "side", "back")
PHOTO_TYPES = ("interior", "exterior", "engine")
SIZES = ("Small", "Medium", "Large", "Wallpaper", "All")
LICENSE_PRESETS = ("Public", "Share", "ShareCommercially", "Modify", "ModifyCommercially")
LICENSE_TOKENS = ("cc_publicdomain", "cc_attribute", "cc_sharealike", "cc_noncommercial", "cc_nonderived")


def check_image_filters(q: Mapping[str, str]) -> None:
    if q.get("angle") and q["angle"] not in ANGLES:
        raise errors.ApiError(400, "Invalid angle. Must be one of: front, side, back")
    if q.get("photoType"):
        if q["photoType"] not in PHOTO_TYPES:
            raise errors.ApiError(400, "Invalid photoType. Must be one of: interior, exterior, engine")
        if not all(q.get(k) for k in ("year", "make", "model", "trim")):
            raise errors.ApiError(400, "photoType can only be used together with year, make, model and trim")
    if q.get("size") and q["size"] not in SIZES:
        raise errors.ApiError(400, "Invalid size. Must be one of: Small, Medium, Large, Wallpaper, All")
    license_ = q.get("license")
    if license_ and license_ not in LICENSE_PRESETS:
        tokens = [t.strip() for t in license_.split(",") if t.strip()]
        if any(t.lstrip("-") not in LICENSE_TOKENS for t in tokens) or all(t.startswith("-") for t in tokens):
            raise errors.ApiError(400, "Invalid license. Use a preset or cc_* tokens with at least one included")
    if q.get("transparent") and q["transparent"] not in ("true", "false"):
        raise errors.ApiError(400, "Invalid transparent. Must be true or false")


def images(make: str, model: str, q: Mapping[str, str]) -> list[dict]:
    if make.lower() not in catalog.MAKE_BY_LOWER or digest("img", make.lower(), model.lower()) % 100 < 5:
        return []
    r = rng("images", make.lower(), model.lower(), q.get("year"), q.get("color"), q.get("angle"))
    slug = f"{make}-{model}".lower().replace(" ", "-")
    out = []
    for i in range(1 + r.randrange(5)):
        width = r.choice([640, 1024, 1600, 1920])
        out.append({"mime": "image/png" if q.get("transparent", "true") == "true" else "image/jpeg",
                    "link": f"https://images.sandbox.vehicle-data.example/{slug}/{i}.png",
                    "contextLink": f"https://www.sandbox.vehicle-data.example/gallery/{slug}",
                    "thumbnailLink": f"https://images.sandbox.vehicle-data.example/{slug}/{i}_thumb.png",
                    "accentColor": f"{r.randrange(16**6):06x}", "height": width * 9 // 16, "width": width,
                    "byteSize": 50000 + r.randrange(900000)})
    return out


def check_image_input(image) -> str:
    if not isinstance(image, str) or not image.strip():
        raise errors.ApiError(400, errors.MISSING_IMAGE)
    image = image.strip()
    if re.match(r"^https?://\S+$", image):
        return image
    payload = image.split(",", 1)[1] if image.startswith("data:") and "," in image else image
    try:
        base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise errors.ApiError(400, errors.INVALID_IMAGE) from None
    if len(payload) < 8:
        raise errors.ApiError(400, errors.INVALID_IMAGE)
    return image


def _box(r, width: int, height: int) -> dict:
    x, y = r.randrange(400), r.randrange(300)
    return {"xmin": x, "ymin": y, "xmax": x + width, "ymax": y + height}


def recognize_plates(image: str) -> dict:
    """Plates in the image, in the shape of the vendor's MCP types (results[] with box and candidates)."""
    r = rng("plate-image", image)
    if r.random() < 0.15:
        raise errors.ApiError(404, errors.NO_PLATES_IN_IMAGE)
    plate = "".join(r.choice(VIN_CHARS) for _ in range(7))
    score = round(0.8 + r.random() * 0.19, 3)
    state = r.choice(catalog.US_STATES)
    found = {"plate": plate, "score": score, "dscore": round(0.7 + r.random() * 0.29, 3), "box": _box(r, 180, 60),
             "candidates": [{"plate": plate, "score": score}], "region": {"code": f"us-{state.lower()}", "score": 0.9},
             "vehicle": {"type": r.choice(["Sedan", "SUV", "Pickup Truck"]), "score": 0.85}}
    return {"camera_id": None, "filename": image.rsplit("/", 1)[-1][:100] if image.startswith("http") else "upload",
            "processing_time": round(40 + r.random() * 80, 3), "results": [found]}


def recognize_vin(image: str) -> dict:
    r = rng("vin-image", image)
    roll = r.random()
    if roll < 0.07:
        raise errors.ApiError(404, errors.NO_TEXT_IN_IMAGE)
    if roll < 0.15:
        raise errors.ApiError(404, errors.NO_VIN_CANDIDATES)
    vin = synthetic_vin(f"ocr:{image}")
    confidence, box = round(0.85 + r.random() * 0.14, 3), _box(r, 340, 40)
    return {"vin": vin, "confidence": confidence, "box": box,
            "candidates": [{"vin": vin, "confidence": confidence, "box": box}]}
