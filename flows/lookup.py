"""`fleet lookup <endpoint> ...`: one call to any endpoint, printed as a table or raw JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from fleet_data.connectors import ENDPOINTS, VehicleDataClient
from fleet_data.connectors.errors import VehicleDataError

from .target import service_settings


def _vin(p: argparse.ArgumentParser) -> argparse.Action:
    return p.add_argument("vin", help="17-character VIN")


def _batch(p: argparse.ArgumentParser) -> None:
    p.add_argument("batch_id")
    p.add_argument("--batch-token", help="batch-scoped token from an x402 submit (used instead of the key)")


def _include(p: argparse.ArgumentParser) -> argparse.Action:
    return p.add_argument("--include", help="comma-separated: demographics,emails,phones,vehicle_history")


# endpoint name -> (add its arguments (what it returns is unused), call the client with the parsed arguments)
COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], object], Callable[[VehicleDataClient, argparse.Namespace], Any]]] = {
    "specs": (
        lambda p: (_vin(p), p.add_argument("--deepdata", action="store_true"), p.add_argument("--no-international", action="store_true")),
        lambda c, a: c.specs(a.vin, deepdata=a.deepdata, disable_international=a.no_international),
    ),
    "international-vin": (_vin, lambda c, a: c.international_vin(a.vin)),
    "market-value": (
        lambda p: (_vin(p), p.add_argument("--state"), p.add_argument("--mileage"),
                   p.add_argument("--condition", help="excellent, clean, average or rough")),
        lambda c, a: c.market_value(a.vin, state=a.state, mileage=a.mileage, condition=a.condition),
    ),
    "market-value-v1": (_vin, lambda c, a: c.market_value_v1(a.vin)),
    "history": (_vin, lambda c, a: c.history(a.vin)),
    "lien-theft": (_vin, lambda c, a: c.lien_theft(a.vin)),
    "recalls": (_vin, lambda c, a: c.recalls(a.vin)),
    "recalls-ymm": (
        lambda p: (p.add_argument("year"), p.add_argument("make"), p.add_argument("model")),
        lambda c, a: c.recalls_by_model(a.year, a.make, a.model),
    ),
    "recalls-batch-submit": (
        lambda p: (p.add_argument("vins", nargs="*"), p.add_argument("--csv-file", type=Path),
                   p.add_argument("--csv-url"), p.add_argument("--webhook-url")),
        lambda c, a: c.submit_recalls_batch(
            a.vins or None, csv=a.csv_file.read_text() if a.csv_file else None, csv_url=a.csv_url, webhook_url=a.webhook_url
        ),
    ),
    "recalls-batch-status": (_batch, lambda c, a: c.recalls_batch_status(a.batch_id, batch_token=a.batch_token)),
    "recalls-batch-results": (_batch, lambda c, a: c.recalls_batch_results(a.batch_id, batch_token=a.batch_token)),
    "recalls-batch-download": (_batch, lambda c, a: c.download_recalls_batch(a.batch_id, batch_token=a.batch_token)),
    "plate": (
        lambda p: (p.add_argument("plate"), p.add_argument("--country", default="US"), p.add_argument("--state"),
                   p.add_argument("--district"), p.add_argument("--require-vin", action="store_true", default=None)),
        lambda c, a: c.plate(a.plate, country=a.country, state=a.state, district=a.district, require_vin=a.require_vin),
    ),
    "us-plate": (
        lambda p: (p.add_argument("plate"), p.add_argument("--state", required=True), p.add_argument("--decode-vin", action="store_true")),
        lambda c, a: c.us_plate(a.plate, a.state, decode_vin=a.decode_vin),
    ),
    "plate-v1": (
        lambda p: (p.add_argument("plate"), p.add_argument("--state")),
        lambda c, a: c.plate_v1(a.plate, a.state),
    ),
    "ownership": (lambda p: (_vin(p), _include(p)), lambda c, a: c.ownership(a.vin, include=_split(a.include))),
    "ownership-phone": (
        lambda p: (p.add_argument("phone"), _include(p)),
        lambda c, a: c.ownership_by_phone(a.phone, include=_split(a.include)),
    ),
    "ownership-phones": (
        lambda p: (p.add_argument("phones", nargs="+"), _include(p)),
        lambda c, a: c.ownership_by_phones(a.phones, include=_split(a.include)),
    ),
    "ownership-person": (
        lambda p: (p.add_argument("first_name"), p.add_argument("last_name"),
                   p.add_argument("address", help="street address only, no city or state"),
                   p.add_argument("zip", help="5-digit ZIP, optionally ZIP+4"), _include(p)),
        lambda c, a: c.ownership_by_person(a.first_name, a.last_name, a.address, a.zip, include=_split(a.include)),
    ),
    "ownership-address": (
        lambda p: (p.add_argument("address", help="street address only, no city or state"), p.add_argument("zip"), _include(p)),
        lambda c, a: c.ownership_by_address(a.address, a.zip, include=_split(a.include)),
    ),
    "ownership-zip": (
        lambda p: (p.add_argument("zip", help="exactly 5 digits"), p.add_argument("--gender", help="M or F"),
                   p.add_argument("--min-age", type=int), p.add_argument("--max-age", type=int), p.add_argument("--income"),
                   p.add_argument("--page", type=int), p.add_argument("--limit", type=int, help="1-100, default 15"), _include(p)),
        lambda c, a: c.ownership_by_zip(a.zip, gender=a.gender, min_age=a.min_age, max_age=a.max_age, income=a.income,
                                        page=a.page, limit=a.limit, include=_split(a.include)),
    ),
    "year-make-model": (
        lambda p: (p.add_argument("year"), p.add_argument("make"), p.add_argument("model"), p.add_argument("--trim")),
        lambda c, a: c.year_make_model(a.year, a.make, a.model, trim=a.trim),
    ),
    "ymm-options": (
        lambda p: [p.add_argument(f"--{n}") for n in ("dimension", "year", "make", "model", "trim")],
        lambda c, a: c.ymm_options(a.dimension, year=a.year, make=a.make, model=a.model, trim=a.trim),
    ),
    "images": (
        lambda p: (p.add_argument("make"), p.add_argument("model"),
                   [p.add_argument(f"--{n}") for n in ("year", "trim", "color", "angle", "photo-type", "size", "license")],
                   p.add_argument("--transparent", choices=["true", "false"])),
        lambda c, a: c.images(
            a.make, a.model, year=a.year, trim=a.trim, color=a.color, angle=a.angle, photo_type=a.photo_type,
            size=a.size, license=a.license, transparent=None if a.transparent is None else a.transparent == "true",
        ),
    ),
    "plate-recognition": (lambda p: p.add_argument("image", help="image URL or base64"), lambda c, a: c.plate_recognition(a.image)),
    "vin-ocr": (lambda p: p.add_argument("image", help="image URL or base64"), lambda c, a: c.vin_ocr(a.image)),
    "obd": (lambda p: p.add_argument("code", help="OBD-II trouble code, e.g. P0115"), lambda c, a: c.obd(a.code)),
}
assert set(COMMANDS) == set(ENDPOINTS), "every endpoint needs a lookup command"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    lookup = subparsers.add_parser("lookup", help="one call to any endpoint of the service")
    inner = lookup.add_subparsers(dest="endpoint", required=True, metavar="ENDPOINT")
    for name, (add_args, _) in COMMANDS.items():
        p = inner.add_parser(name, help=ENDPOINTS[name].summary)
        add_args(p)
        p.add_argument("--json", action="store_true", help="print the raw (redacted) JSON answer")
    lookup.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .checks import service

    _, call = COMMANDS[args.endpoint]
    # A base URL without a key is refused here, as refresh refuses it: not sent on to answer 401. A batch
    # token stands in for the key on the batch reads it was issued for.
    service(needs_calls=not getattr(args, "batch_token", None))
    with service_settings() as settings, VehicleDataClient(settings) as client:
        try:
            result = call(client, args)
        except VehicleDataError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(_raw(result), indent=2, default=str))
    else:
        _print_table(args.endpoint, _plain(result))
    return 0


def _split(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def _raw(result: Any) -> Any:
    if isinstance(result, list):
        return [_raw(r) for r in result]
    if getattr(result, "raw", None):
        return result.raw
    return result.model_dump(mode="json", exclude_none=True) if hasattr(result, "model_dump") else result


def _plain(result: Any) -> Any:
    if isinstance(result, list):
        return [_plain(r) for r in result]
    return result.model_dump(mode="json", exclude_none=True) if hasattr(result, "model_dump") else result


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(value, dict):
        rows: list[tuple[str, str]] = []
        for k, v in value.items():
            rows += _flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return rows
    if isinstance(value, list):
        if all(not isinstance(v, (dict, list)) for v in value):
            return [(prefix, ", ".join(str(v) for v in value))] if value else []
        rows = []
        for i, v in enumerate(value):
            rows += _flatten(v, f"{prefix}[{i}]")
        return rows
    return [(prefix, "" if value is None else str(value))]


def _print_table(title: str, data: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("field")
    table.add_column("value", overflow="fold")
    for field, value in _flatten(data):
        if field not in ("success",):
            table.add_row(field, value)
    Console().print(table)
