"""Typed results -> Arrow-ready polars frames shaped like the DuckDB tables.

The same functions stage fresh answers and re-parse stored raw responses, so a
model change is applied to history without paying for the calls again.
Frames carry no `run_id` (the store stamps it); `fetched_at` is per row.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime
from typing import Any, Iterable, Sequence

import polars as pl

from fleet_data.connectors import models as m
from fleet_data.connectors.calls import CallRecord
from fleet_data.connectors.models.market_value import TradeInValue

COLOR = pl.Struct({"category": pl.String, "name": pl.String})
EQUIPMENT = pl.Struct({"name": pl.String, "value": pl.String})
WARRANTY = pl.Struct({"type": pl.String, "miles": pl.Int32, "months": pl.Int32})
# Money: dollars to the cent, as market_values holds it (sql/migrations/0008_analyst_types.sql).
MONEY = pl.Decimal(12, 2)
GROUP = pl.Struct({k: pl.String if k in ("kind", "tier") else MONEY
                   for k in ("kind", "tier", "base", "mileage", "add_deduct", "regional", "adjusted")})
AUCTION = pl.Struct({"low_auction_value": MONEY, "average_auction_value": MONEY,
                     "high_auction_value": MONEY, "date_range": pl.String})
MILEAGE_BAND = pl.Struct({"model_year": pl.String, "range_begin": pl.Int32, "range_end": pl.Int32,
                          "xclean": MONEY, "clean": MONEY, "avg": MONEY, "rough": MONEY,
                          "finadv": MONEY, "mileage_cat": pl.String})
ADD_DEDUCT = pl.Struct({"uoc": pl.String, "name": pl.String, "xclean": MONEY, "clean": MONEY,
                        "avg": MONEY, "rough": MONEY, "auto": pl.String})
TS = pl.Datetime("us", "UTC")
Schema = dict[str, pl.DataType | type[pl.DataType]]  # dtype classes (pl.String) and instances (TS) alike
_GROUP_FIELDS = set(GROUP.to_schema())
_AUCTION_FIELDS = set(AUCTION.to_schema())
_BAND_FIELDS = set(MILEAGE_BAND.to_schema())
_ADD_DEDUCT_FIELDS = set(ADD_DEDUCT.to_schema())

Fetched = tuple[str, Any, datetime]  # (vin, parsed result, fetched_at)


def _frame(rows: list[dict[str, Any]], schema: Schema) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def _pick(obj: Any, fields: Iterable[str]) -> dict[str, Any]:
    return {f: getattr(obj, f, None) for f in fields}


SPECS_SCHEMA: Schema = {
    "vin": pl.String, "year": pl.Int32, "make": pl.String, "model": pl.String, "trim": pl.String,
    "style": pl.String, "type": pl.String, "made_in": pl.String, "doors": pl.Int32, "fuel_type": pl.String,
    "engine": pl.String, "engine_cylinders": pl.Int32, "transmission": pl.String, "drivetrain": pl.String,
    "colors": pl.List(COLOR), "equipment": pl.List(EQUIPMENT), "warranties": pl.List(WARRANTY),
    "is_international": pl.Boolean, "fetched_at": TS,
}


def specs_frame(fetched: Sequence[Fetched]) -> pl.DataFrame:
    rows = []
    for vin, r, at in fetched:
        a = r.attributes
        rows.append({
            "vin": vin,
            **_pick(a, ("year", "make", "model", "trim", "style", "type", "made_in", "doors", "fuel_type",
                        "engine", "engine_cylinders", "transmission", "drivetrain")),
            "colors": [{"category": c.category, "name": c.name} for c in r.colors],
            "equipment": [{"name": k, "value": v} for k, v in r.equipment.items()],
            "warranties": [{"type": w.type, "miles": w.miles, "months": w.months} for w in r.warranties],
            "is_international": r.is_international,
            "fetched_at": at,
        })
    return _frame(rows, SPECS_SCHEMA)


MARKET_SCHEMA: Schema = {
    "vin": pl.String, "valued_on": pl.Date, "state": pl.String, "mileage": pl.Int64, "mileage_unit": pl.String,
    "condition": pl.String, "mileage_source": pl.String, "country": pl.String,
    "model_year": pl.Int32, "make": pl.String, "model": pl.String, "series": pl.String, "style": pl.String,
    "uvc": pl.String, "publish_date": pl.Date, "retail": MONEY, "trade_in": MONEY,
    "rough_trade_in": MONEY, "average_trade_in": MONEY, "loan_value": MONEY, "msrp": MONEY,
    "retail_equipped": MONEY, "valuation_groups": pl.List(GROUP), "auction_values": AUCTION,
    "mileage_list": pl.List(MILEAGE_BAND), "add_deduct_list": pl.List(ADD_DEDUCT), "fetched_at": TS,
}


def _as_parsed(dtype: Any) -> Any:
    """`dtype` with money as the models give it (float) and days as text: what rows are built with."""
    if dtype == MONEY:
        return pl.Float64
    if isinstance(dtype, pl.List):
        return pl.List(_as_parsed(dtype.inner))
    if isinstance(dtype, pl.Struct):
        return pl.Struct({f.name: _as_parsed(f.dtype) for f in dtype.fields})
    return dtype


_ISO_DAY = r"^\d{4}-\d{2}-\d{2}(T.*)?$"


def _typed_market(frame: pl.DataFrame) -> pl.DataFrame:
    """Money to the cent (beyond DECIMAL(12,2) is NULL), publish_date as the day it names (else NULL): the
    SQL shred's shred_money and shred_day."""
    day = pl.col("publish_date").str.strip_chars()
    return frame.with_columns(
        pl.when(day.str.contains(_ISO_DAY)).then(day.str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False))
        .alias("publish_date"),
        *[pl.col(c).cast(t, strict=False) for c, t in MARKET_SCHEMA.items() if _as_parsed(t) != t and c != "publish_date"],
    )


def market_values_frame(fetched: Sequence[Fetched], requests: dict[str, dict[str, Any]]) -> pl.DataFrame:
    """`requests[vin]` holds what was asked (state, mileage and its unit, condition: the valuation's key) and where
    the mileage came from (tasks/datasets.py `valuation_request`)."""
    rows = []
    for vin, r, at in fetched:
        asked = requests.get(vin, {})
        mileage = asked.get("mileage")
        rows.append({
            "vin": vin,
            "valued_on": at.date() if isinstance(at, datetime) else date.today(),
            "state": asked.get("state"),
            "mileage": int(mileage) if mileage is not None else None,
            # Stored answers from before units were recorded were asked in miles.
            "mileage_unit": asked.get("mileage_unit") or ("mi" if mileage is not None else None),
            "condition": asked.get("condition"),
            "mileage_source": asked.get("mileage_source"), "country": asked.get("country"),
            **_pick(r, ("model_year", "make", "model", "series", "style", "uvc", "publish_date", "retail",
                        "trade_in", "rough_trade_in", "average_trade_in", "loan_value", "msrp", "retail_equipped")),
            "valuation_groups": [g.model_dump(include=_GROUP_FIELDS) for g in r.groups],
            "auction_values": r.auction_values.model_dump(include=_AUCTION_FIELDS) if r.auction_values else None,
            "mileage_list": [b.model_dump(include=_BAND_FIELDS) for b in r.mileage_list],
            "add_deduct_list": [d.model_dump(include=_ADD_DEDUCT_FIELDS) for d in r.add_deduct_list],
            "fetched_at": at,
        })
    parsed = {c: pl.String if c == "publish_date" else _as_parsed(t) for c, t in MARKET_SCHEMA.items()}
    return _typed_market(_frame(rows, parsed))


TRADE_IN_HISTORY_SCHEMA: Schema = {
    "vin": pl.String, "month": pl.Date, "trade_in": MONEY, "valued_on": pl.Date, "state": pl.String,
    "mileage": pl.Int64, "mileage_unit": pl.String, "condition": pl.String, "mileage_source": pl.String, "fetched_at": TS,
}
_MONTH = re.compile(r"^\s*(\d{4})-(\d{2})")


def _month(value: Any) -> date | None:
    """The month a `trade_in_values` date names, read from its text as sent (no time zone shift)."""
    match = _MONTH.match(value if isinstance(value, str) else json.dumps(value) if value is not None else "")
    if not match or not 1 <= int(match.group(2)) <= 12 or int(match.group(1)) < 1:
        return None
    return date(int(match.group(1)), int(match.group(2)), 1)


def trade_in_history_frame(fetched: Sequence[Fetched], requests: dict[str, dict[str, Any]]) -> pl.DataFrame:
    """The months before each valuation its answer lists (`trade_in_values`), with what was asked; a month
    listed twice: its last item."""
    rows = []
    for vin, r, at in fetched:
        asked = requests.get(vin, {})
        mileage = asked.get("mileage")
        months: dict[date, float] = {}
        for item in getattr(r, "trade_in_values", None) or []:
            if not isinstance(item, dict):
                continue
            month, value = _month(item.get("date")), TradeInValue.model_validate({"value": item.get("value")}).value
            if month is not None and value is not None:
                months.pop(month, None)
                months[month] = value
        rows += [{"vin": vin, "month": month, "trade_in": value,
                  "valued_on": at.date() if isinstance(at, datetime) else date.today(), "state": asked.get("state"),
                  "mileage": int(mileage) if mileage is not None else None,
                  "mileage_unit": asked.get("mileage_unit") or ("mi" if mileage is not None else None),
                  "condition": asked.get("condition"), "mileage_source": asked.get("mileage_source"),
                  "fetched_at": at} for month, value in months.items()]
    frame = _frame(rows, {**TRADE_IN_HISTORY_SCHEMA, "trade_in": pl.Float64})
    # Money to the cent, as shred_money: beyond DECIMAL(12,2) is no figure, so no row.
    return frame.with_columns(pl.col("trade_in").cast(MONEY, strict=False)).filter(pl.col("trade_in").is_not_null())


HISTORY_SCHEMA: Schema = {
    "vin": pl.String, "brands_record_count": pl.Int32, "vin_changed": pl.Boolean, "title_brands": pl.List(pl.String),
    "junk_and_salvage_information": pl.List(pl.String), "insurance_information": pl.List(pl.String),
    "brands_information": pl.List(pl.String), "current_title_information": pl.List(pl.String),
    "history_information": pl.List(pl.String), "fetched_at": TS,
}
_HISTORY_ARRAYS = {
    "junk_and_salvage_information": "junkAndSalvageInformation", "insurance_information": "insuranceInformation",
    "brands_information": "brandsInformation", "current_title_information": "currentTitleInformation",
    "history_information": "historyInformation",
}


def _brand_name(record: dict[str, Any]) -> str | None:
    for key in ("brand", "brand_name", "brandName", "name", "title_brand", "code", "brand_code"):
        if record.get(key):
            return str(record[key])
    return None


def history_frame(fetched: Sequence[Fetched]) -> pl.DataFrame:
    import json

    rows = []
    for vin, r, at in fetched:
        row = {"vin": vin, "brands_record_count": r.brandsRecordCount, "vin_changed": r.vinChanged, "fetched_at": at}
        for column, field in _HISTORY_ARRAYS.items():
            row[column] = [json.dumps(item, default=str, sort_keys=True) for item in getattr(r, field)]
        row["title_brands"] = sorted({b for item in r.brandsInformation if (b := _brand_name(item))})
        rows.append(row)
    return _frame(rows, HISTORY_SCHEMA)


LIEN_SCHEMA: Schema = {
    "vin": pl.String, "event_index": pl.Int32, "event": pl.String, "location": pl.String,
    "details_list": pl.List(pl.String), "year": pl.Int32, "make": pl.String, "model": pl.String,
    "type": pl.String, "fetched_at": TS,
}


def lien_theft_frame(fetched: Sequence[Fetched]) -> pl.DataFrame:
    rows = [
        {"vin": vin, "event_index": i, "event": ev.event, "location": ev.location,
         "details_list": list(ev.details_list), **_pick(r, ("year", "make", "model", "type")), "fetched_at": at}
        for vin, r, at in fetched
        for i, ev in enumerate(r.events)
    ]
    return _frame(rows, LIEN_SCHEMA)


RECALL_CHECK_SCHEMA: Schema = {
    "vin": pl.String, "checked_via": pl.String, "batch_id": pl.String, "has_recalls": pl.Boolean,
    "recall_count": pl.Int32, "campaigns_listed": pl.Boolean, "fetched_at": TS,
}


def recall_checks_from_batch(items: Sequence[m.BatchResultItem], batch_id: str, at: datetime) -> pl.DataFrame:
    rows = [{"vin": i.vin, "checked_via": "batch", "batch_id": batch_id, "has_recalls": i.hasRecalls,
             "recall_count": i.recallCount, "campaigns_listed": i.recallCount == 0, "fetched_at": at} for i in items]
    return _frame(rows, RECALL_CHECK_SCHEMA)


def recall_checks_from_reports(fetched: Sequence[Fetched], no_data: Sequence[tuple[str, datetime]] = ()) -> pl.DataFrame:
    """Per-VIN lookups; a 404 "no data" is a check too: no campaign listed, so the VIN's open ones close."""
    rows: list[dict[str, Any]] = [{"vin": vin, "checked_via": "vin", "batch_id": None, "has_recalls": None,
                                   "recall_count": None, "campaigns_listed": True, "fetched_at": at} for vin, at in no_data]
    for vin, r, at in fetched:
        count = r.data.recall_count if r.data.recall_count is not None else len(r.data.recalls)
        rows.append({"vin": vin, "checked_via": "vin", "batch_id": None, "has_recalls": count > 0,
                     "recall_count": count, "campaigns_listed": True, "fetched_at": at})
    return _frame(rows, RECALL_CHECK_SCHEMA)


RECALL_SCHEMA: Schema = {
    "vin": pl.String, "nhtsa_campaign_number": pl.String, "manufacturer": pl.String, "park_it": pl.Boolean,
    "park_outside": pl.Boolean, "over_the_air_update": pl.Boolean, "report_received_date": pl.Date,
    "component": pl.String, "summary": pl.String, "consequence": pl.String, "remedy": pl.String,
    "notes": pl.String, "matched_by": pl.String, "fetched_at": TS,
}
_RECALL_FIELDS = tuple(k for k in RECALL_SCHEMA if k not in ("vin", "matched_by", "fetched_at"))


def recalls_frame(per_vin: Sequence[tuple[str, Sequence[m.Recall], datetime]], matched_by: str = "vin") -> pl.DataFrame:
    """`matched_by`: `vin` when the VIN's own lookup listed the campaigns, `model` for its model's list."""
    rows = [
        {"vin": vin, **_pick(recall, _RECALL_FIELDS), "matched_by": matched_by, "fetched_at": at}
        for vin, recalls, at in per_vin
        for recall in recalls
        if recall.nhtsa_campaign_number
    ]
    return _frame(rows, RECALL_SCHEMA)


CALL_SCHEMA: Schema = {
    "call_id": pl.String, "endpoint": pl.String, "method": pl.String, "vin": pl.String, "batch_id": pl.String,
    "status": pl.Int32, "units": pl.Int32, "latency_ms": pl.Float64, "attempt": pl.Int32,
    "error_message": pl.String, "replayed": pl.Boolean, "fetched_at": TS, "billing": pl.String,
}


def api_calls_frame(calls: Sequence[tuple[str, CallRecord, datetime, str | None]]) -> pl.DataFrame:
    """`calls`: (call_id, record, called_at, batch_id)."""
    rows = [
        {"call_id": cid, "endpoint": c.path, "method": c.method, "vin": c.vin, "batch_id": batch, "status": c.status,
         "units": c.units, "latency_ms": c.latency_ms, "attempt": c.attempt, "error_message": c.error,
         "replayed": c.replayed, "fetched_at": at, "billing": "unknown" if c.unknown else "known"}
        for cid, c, at, batch in calls
    ]
    return _frame(rows, CALL_SCHEMA)


FAILURE_SCHEMA: Schema = {
    "vin": pl.String, "dataset": pl.String, "status": pl.Int32, "message": pl.String, "retryable": pl.Boolean,
    "attempts": pl.Int32, "fetched_at": TS, "endpoint": pl.String,  # the path called, as api_calls has it
}


def failures_frame(rows: Sequence[dict[str, Any]]) -> pl.DataFrame:
    return _frame(list(rows), FAILURE_SCHEMA)


RAW_SCHEMA: Schema = {
    "response_hash": pl.String, "dataset": pl.String, "vin": pl.String, "batch_id": pl.String,
    "endpoint": pl.String, "request_params": pl.String, "status": pl.Int32, "body": pl.String, "fetched_at": TS,
}


def raw_responses_frame(rows: Sequence[dict[str, Any]]) -> pl.DataFrame:
    import hashlib
    import json

    out = []
    for row in rows:
        body = json.dumps(row["body"], sort_keys=True, default=str)
        digest = hashlib.sha256(f"{row['dataset']}|{row.get('vin')}|{row.get('batch_id')}|{body}".encode()).hexdigest()
        out.append({**row, "response_hash": digest, "body": body,
                    "request_params": json.dumps(row.get("request_params") or {}, sort_keys=True, default=str)})
    return _frame(out, RAW_SCHEMA)
