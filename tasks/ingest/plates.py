"""Rows with a plate instead of a VIN: which can be looked up, what it costs, and where each row lands.

The lookups themselves are tasks/fetch/plates.py's; landing them, tasks/land/plates.py's.

One lookup per distinct (country, state, plate) through the v2 plate decoder (`GET /v2/platedecoder`),
always with `country` (the spec's migration guidance says to always send it) and with the state the
spec asks for: a US state (a US plate without one would be searched in every state and billed per
hit, so it is not looked up), a Canadian province or an Australian state (required for CA and AU);
other countries are asked by country alone. The country comes from the file's country column, else
from the state (tasks/ingest/markets.py).

A plate whose latest lookup found a VIN less than PLATE_FRESHNESS (90 days) ago is not looked up
again, nor one not found (404) less than PLATE_NOT_FOUND_FRESHNESS (7 days) ago. Each row then ends in one place:
the roster (`vehicles.vin_source = 'plate'`), a duplicate of a VIN already on it, or `rejected_rows`
with one of the reasons below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from fleet_data.connectors import CallRecord, estimate_units

from fleet_data.tasks.ingest.markets import AU_STATES, CA_PROVINCES, US_STATES, country_expr, state_country_expr
from fleet_data.tasks.ingest.vins import normalise_vin_expr, vin_reject_reason_expr, with_check_digit_valid
from fleet_data.tasks.settings import CLOCK_TOLERANCE, service_in_use

if TYPE_CHECKING:
    from fleet_data.tasks.ingest.fleet_files import IngestResult
    from fleet_data.tasks.land.frames import Schema
    from fleet_data.tasks.store.database import Database

PLATE_FRESHNESS = timedelta(days=90)  # a plate rarely changes hands in a quarter; a new lookup costs a unit
# "Not found" is asked again sooner: a 404 costs no unit, and a new registration may have appeared.
PLATE_NOT_FOUND_FRESHNESS = timedelta(days=7)
ENDPOINT = "plate"

# rejected_rows.reason for a plate row that did not become a roster VIN.
PLATE_NEEDS_STATE = "plate_needs_state"  # no state (or country) the decoder can be asked with
PLATE_LOOKUP_OFF = "plate_lookup_off"  # --no-plates
PLATE_NOT_LOOKED_UP = "plate_not_looked_up"  # dry run, refused plan, --max-units, quota or credits: next run asks
PLATE_NOT_FOUND = "plate_not_found"  # 404, or an answer without a usable VIN
PLATE_LOOKUP_FAILED = "plate_lookup_failed"  # an error that outlived the retries
OUTCOME_REASONS = {"not_found": PLATE_NOT_FOUND, "failed": PLATE_LOOKUP_FAILED}
PLATE_REJECT_REASONS = (PLATE_NEEDS_STATE, PLATE_LOOKUP_OFF, PLATE_NOT_LOOKED_UP, PLATE_NOT_FOUND, PLATE_LOOKUP_FAILED)

KEY = ["lookup_country", "lookup_state", "lookup_plate"]
STATE_REQUIRED = {"US": US_STATES, "CA": CA_PROVINCES, "AU": AU_STATES}
REJECTED_SCHEMA = {"source_file": pl.String, "source_row": pl.Int64, "raw_value": pl.String, "reason": pl.String}

Key = tuple[str | None, str | None, str]  # (country, state, plate) as sent


def _text(frame: pl.DataFrame, name: str) -> pl.Expr:
    return pl.col(name).cast(pl.String) if name in frame.columns else pl.lit(None, pl.String)


def with_lookup_keys(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` plus what each is looked up with (lookup_country, lookup_state, lookup_plate) or why it cannot be."""
    state = _text(rows, "state").str.strip_chars().str.to_uppercase()
    state = pl.when(state.str.len_chars() > 0).then(state)
    country = pl.coalesce(country_expr(_text(rows, "country")), state_country_expr(state))
    needs_state = pl.lit(False)
    sent_state = pl.lit(None, pl.String)
    for code, states in STATE_REQUIRED.items():
        valid = state.is_in(sorted(states))
        needs_state = needs_state | ((country == code) & ~valid.fill_null(False))
        sent_state = pl.when((country == code) & valid).then(state).otherwise(sent_state)
    plate = _text(rows, "plate").str.replace_all(r"[\s\-]", "").str.to_uppercase()
    return rows.with_columns(
        country.alias("lookup_country"),
        sent_state.alias("lookup_state"),
        plate.alias("lookup_plate"),
        pl.when(country.is_null() | needs_state.fill_null(False)).then(pl.lit(PLATE_NEEDS_STATE)).alias("plate_problem"),
    )


def lookup_keys(rows: pl.DataFrame) -> list[Key]:
    """The distinct lookups `rows` (with lookup keys) need, in first-seen order."""
    return [tuple(k) for k in rows.select(KEY).unique(maintain_order=True).rows()]


def _rejected(rows: pl.DataFrame, reason: str | pl.Expr) -> pl.DataFrame:
    reason = pl.lit(reason) if isinstance(reason, str) else reason
    return rows.select("source_file", "source_row", pl.lit(None, pl.String).alias("raw_value"),
                       reason.alias("reason")).cast(REJECTED_SCHEMA)  # type: ignore[arg-type]


def _without_keys(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.drop([c for c in (*KEY, "plate_problem") if c in rows.columns])


@dataclass
class SortedPlates:
    """Plate rows at ingest: `known` (with `vin`), `waiting` for a lookup (with keys), `rejected`."""

    known: pl.DataFrame
    waiting: pl.DataFrame
    rejected: pl.DataFrame


def sort_plate_rows(plates: pl.DataFrame, *, fresh: pl.DataFrame | None, enabled: bool) -> SortedPlates:
    """Settle what needs no call: plates without a usable state, `--no-plates`, and plates looked up recently.

    `fresh`: the latest lookups still standing (plate, state, country, vin, outcome found | not_found).
    """
    keyed = with_lookup_keys(plates)
    if not enabled:
        return SortedPlates(keyed.head(0), keyed.head(0), _rejected(keyed, PLATE_LOOKUP_OFF))
    rejected = [_rejected(keyed.filter(pl.col("plate_problem").is_not_null()), pl.col("plate_problem"))]
    usable = keyed.filter(pl.col("plate_problem").is_null())
    known = usable.head(0).with_columns(pl.lit(None, pl.String).alias("vin"))
    if fresh is not None and fresh.height:
        standing = fresh.select(pl.col("country").alias("lookup_country"), pl.col("state").alias("lookup_state"),
                                pl.col("plate").alias("lookup_plate"), "vin", pl.col("outcome").alias("_outcome"))
        joined = usable.join(standing, on=KEY, how="left", nulls_equal=True, maintain_order="left")
        known = joined.filter(pl.col("_outcome") == "found").drop("_outcome")
        rejected.append(_rejected(joined.filter(pl.col("_outcome") == "not_found"), PLATE_NOT_FOUND))
        usable = joined.filter(pl.col("_outcome").is_null()).drop("vin", "_outcome")
    return SortedPlates(_without_keys(known), usable, pl.concat(rejected).sort("source_file", "source_row"))


@dataclass
class PlatePlan:
    rows: int  # rows waiting for a lookup
    lookups: int  # distinct plates among them: one call each
    estimated_units: int
    path: str  # the staged waiting rows (Parquet)


def plan_plates(path: str) -> PlatePlan:
    """What looking up the staged waiting rows will cost (a 404 is free: the estimate is a ceiling)."""
    rows = pl.read_parquet(path, columns=KEY)
    keys = lookup_keys(rows)
    units = sum(estimate_units(ENDPOINT, {"country": country}) for country, _, _ in keys)
    return PlatePlan(rows.height, len(keys), units, path)


@dataclass
class Lookup:
    outcome: str  # found | not_found | failed
    vin: str | None
    status: int | None
    message: str | None
    fetched_at: datetime


@dataclass
class PlateLookups:
    results: dict[Key, Lookup] = field(default_factory=dict)
    not_looked_up: list[Key] = field(default_factory=list)
    calls: list[tuple[str, CallRecord, datetime, str | None]] = field(default_factory=list)
    stop_reason: str | None = None

    @property
    def units(self) -> int:
        return sum(c.units for _, c, _, _ in self.calls)


def _lookups_frame(lookups: PlateLookups) -> pl.DataFrame:
    rows = [{"lookup_country": k[0], "lookup_state": k[1], "lookup_plate": k[2], "outcome": r.outcome,
             "answered_vin": r.vin, "status": r.status, "message": r.message, "fetched_at": r.fetched_at}
            for k, r in lookups.results.items()]
    rows += [{"lookup_country": k[0], "lookup_state": k[1], "lookup_plate": k[2], "outcome": "not_looked_up"}
             for k in lookups.not_looked_up]
    schema: Schema = {"lookup_country": pl.String, "lookup_state": pl.String, "lookup_plate": pl.String, "outcome": pl.String,
                      "answered_vin": pl.String, "status": pl.Int32, "message": pl.String, "fetched_at": pl.Datetime("us", "UTC")}
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    # The decoder's VIN must pass the rules a VIN from the file passes, or it cannot join the roster.
    frame = with_check_digit_valid(frame.with_columns(normalise_vin_expr("answered_vin").alias("vin")))
    reason = vin_reject_reason_expr("vin", "check_digit_valid")
    bad = (pl.col("outcome") == "found") & reason.is_not_null()
    return frame.with_columns(
        pl.when(bad).then(pl.lit("not_found")).otherwise(pl.col("outcome")).alias("outcome"),
        pl.when(bad).then(pl.format("the decoder's VIN {} fails the VIN rules ({})", pl.col("answered_vin"), reason))
        .otherwise(pl.col("message")).alias("message"),
        pl.when(bad).then(None).otherwise(pl.col("vin")).alias("vin"),
    )


def place_looked_up(waiting: pl.DataFrame, lookups: PlateLookups) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The waiting rows (with keys) as (rows with their `vin`, rejected rows with their reason)."""
    outcomes = _lookups_frame(lookups).select(*KEY, "outcome", "vin")
    joined = waiting.join(outcomes, on=KEY, how="left", nulls_equal=True, maintain_order="left")
    found = joined.filter(pl.col("outcome") == "found").drop("outcome")
    reason = pl.col("outcome").replace_strict(OUTCOME_REASONS, default=PLATE_NOT_LOOKED_UP, return_dtype=pl.String)
    rejected = _rejected(joined.filter((pl.col("outcome") != "found") | pl.col("outcome").is_null()), reason)
    return _without_keys(found), rejected


def resolutions_frame(lookups: PlateLookups) -> pl.DataFrame:
    """The `plate_resolutions` rows: one per lookup made (plates not looked up have none)."""
    frame = _lookups_frame(lookups).filter(pl.col("outcome") != "not_looked_up")
    return frame.select(pl.col("lookup_plate").alias("plate"), pl.col("lookup_state").alias("state"),
                        pl.col("lookup_country").alias("country"), "vin", "outcome", "status", "message", "fetched_at")


def merge_into_roster(roster: pl.DataFrame, found: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, int]]:
    """Rows found by plate joined to `roster`: (roster with duplicates counted, new roster rows, counts).

    A VIN already on the roster (listed by the file, or found by an earlier row) makes the row a duplicate;
    the first row of each new VIN joins the roster as `vin_source = 'plate'`.
    """
    if not found.height:
        return roster, found.head(0), {"valid": 0, "duplicates": 0}
    listed = found.filter(pl.col("vin").is_in(roster["vin"].implode()))
    bumps = listed.group_by("vin").agg(pl.len().alias("bump"))
    merged = roster
    if bumps.height:
        merged = roster.join(bumps, on="vin", how="left", maintain_order="left").with_columns(
            (pl.col("duplicate_count").fill_null(0) + pl.col("bump").fill_null(0)).alias("duplicate_count")
        ).drop("bump")
    rest = found.filter(~pl.col("vin").is_in(roster["vin"].implode()))
    counts = rest.group_by("vin", maintain_order=True).agg((pl.len() - 1).cast(pl.Int64).alias("duplicate_count"))
    new = rest.unique("vin", keep="first", maintain_order=True).join(counts, on="vin", maintain_order="left")
    new = with_check_digit_valid(new.with_columns(pl.lit("plate").alias("vin_source")))
    extra = int(counts["duplicate_count"].sum()) if counts.height else 0
    return merged, new, {"valid": new.height, "duplicates": listed.height + extra}


def _now() -> datetime:
    return datetime.now(timezone.utc)


def settle_at_ingest(
    db: "Database", result: "IngestResult", *, enabled: bool, waiting_path: Path, now: datetime | None = None,
    service: str | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, int]]:
    """The roster, rejected rows and ingest counts once every plate row that needs no call is settled.

    Rows waiting for a lookup are staged at `waiting_path`; `plates_waiting` counts them, so that
    rows_in = valid + duplicates + rejected + plates_waiting. A lookup stands only for the `service` that
    answered it (default: the one in use) and when not dated in the future (a clock ahead).
    """
    now = now or _now()
    fresh = db.query("fresh_plate_resolutions", found_after=now - PLATE_FRESHNESS,
                     not_found_after=now - PLATE_NOT_FOUND_FRESHNESS, future_after=now + CLOCK_TOLERANCE,
                     service=service or service_in_use()) if enabled else None
    sorted_ = sort_plate_rows(result.plates, fresh=fresh, enabled=enabled)
    roster, new, added = merge_into_roster(result.roster, sorted_.known)
    counts = result.summary()
    counts.update(valid=counts["valid"] + added["valid"], duplicates=counts["duplicates"] + added["duplicates"],
                  rejected=counts["rejected"] + sorted_.rejected.height, plates_known=sorted_.known.height,
                  plates_waiting=sorted_.waiting.height)
    if sorted_.waiting.height:
        waiting_path.parent.mkdir(parents=True, exist_ok=True)
        sorted_.waiting.write_parquet(waiting_path)
    roster = pl.concat([roster, new], how="diagonal_relaxed") if new.height else roster
    rejected = pl.concat([result.rejected, sorted_.rejected]) if sorted_.rejected.height else result.rejected
    return roster, rejected, counts
