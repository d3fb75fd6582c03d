"""Where a vehicle is registered (its market), and so which of the service's datasets can answer for it.

The market is read from the best evidence there is, first match wins:
1. the fleet file's country column (ISO 3166-1 alpha-2, or a few country names);
2. its state column: a US state (DC and PR included), then a Canadian province, then an Australian
   state (`WA` and `NT` read as US / Canadian: give a country column for Western Australia or the
   Northern Territory);
3. the VIN: first character 1-5 is a North American VIN (49 CFR 565), country not known;
4. the service: a VIN `/specs` decoded as a US VIN (not through its international fallback);
5. otherwise the vehicle is `international`.
Where a vehicle was built is not where it is registered: a Japanese- or German-built car in a Texas
fleet is a US vehicle, so the file's state and country come before the VIN.

A dataset declares the markets it answers for (`tasks.enrich.DATASETS`); `None` means every vehicle.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import polars as pl

US_STATES = frozenset("""AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ
NM NY NC ND OH OK OR PA PR RI SC SD TN TX UT VT VA WA WV WI WY""".split())
CA_PROVINCES = frozenset("AB BC MB NB NL NS NT NU ON PE QC SK YT".split())
AU_STATES = frozenset("NSW VIC QLD WA SA TAS ACT NT".split())
NORTH_AMERICA = frozenset({"US", "CA", "MX"})
COUNTRY_NAMES = {
    "USA": "US", "UNITED STATES": "US", "UNITED STATES OF AMERICA": "US", "CANADA": "CA", "MEXICO": "MX",
    "MÉXICO": "MX", "AUSTRALIA": "AU", "UK": "GB", "UNITED KINGDOM": "GB", "GREAT BRITAIN": "GB",
    "GERMANY": "DE", "DEUTSCHLAND": "DE", "FRANCE": "FR", "SPAIN": "ES", "ITALY": "IT", "JAPAN": "JP",
}  # fmt: skip

NORTH_AMERICAN_VIN = "north_america"  # first character 1-5, no country or state in the file
INTERNATIONAL = "international"  # any other VIN with nothing else known


def country_expr(column: pl.Expr) -> pl.Expr:
    """ISO alpha-2 code from a free-text country cell; null when it is not one we know."""
    text = column.cast(pl.String).str.strip_chars().str.to_uppercase()
    named = text.replace_strict(COUNTRY_NAMES, default=None, return_dtype=pl.String)
    return pl.coalesce(named, pl.when(text.str.contains(r"^[A-Z]{2}$")).then(text))


def state_country_expr(state: pl.Expr) -> pl.Expr:
    """The country a state or province code belongs to (US first, then Canada, then Australia)."""
    code = state.cast(pl.String).str.strip_chars().str.to_uppercase()
    return (
        pl.when(code.is_in(list(US_STATES))).then(pl.lit("US"))
        .when(code.is_in(list(CA_PROVINCES))).then(pl.lit("CA"))
        .when(code.is_in(list(AU_STATES))).then(pl.lit("AU"))
    )  # fmt: skip


def _column(frame: pl.DataFrame, name: str, dtype: pl.DataType) -> pl.Expr:
    return pl.col(name) if name in frame.columns else pl.lit(None, dtype)


def with_market(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` (vin, and optionally state, country, specs_international) plus its `market` column."""
    vin = pl.col("vin")
    decoded_in_us = _column(frame, "specs_international", pl.Boolean()).not_()
    market = pl.coalesce(
        country_expr(_column(frame, "country", pl.String())),
        state_country_expr(_column(frame, "state", pl.String())),
        pl.when(vin.str.slice(0, 1).is_in(list("12345")) | decoded_in_us.fill_null(False))
        .then(pl.lit(NORTH_AMERICAN_VIN))
        .otherwise(pl.lit(INTERNATIONAL)),
    )
    return frame.with_columns(market.alias("market"))


def applies(markets: Collection[str] | None, market: str) -> bool:
    """Can a dataset answering for `markets` answer for a vehicle of `market`?"""
    if markets is None:
        return True
    if market == NORTH_AMERICAN_VIN:  # could be any North American country: call rather than miss it
        return bool(NORTH_AMERICA & set(markets))
    return market in markets


def in_scope(frame: pl.DataFrame, markets: Collection[str] | None) -> pl.DataFrame:
    """The rows of a `with_market` frame that a dataset answering for `markets` applies to."""
    if markets is None:
        return frame
    wanted = set(markets) | ({NORTH_AMERICAN_VIN} if NORTH_AMERICA & set(markets) else set())
    return frame.filter(pl.col("market").is_in(sorted(wanted)))


# --- the same rule in SQL, for the views that say per VIN what a dataset answers (vin_status) --------------

REGISTRY_SQL = Path(__file__).resolve().parents[2] / "sql" / "views" / "00_registry.sql"


def _sql_list(values: Collection[str]) -> str:
    return ", ".join("'" + v.replace("'", "''") + "'" for v in sorted(values))


def registry_sql() -> str:
    """sql/views/00_registry.sql: the market rule above and the registry's datasets (tasks/datasets.py) as DuckDB
    macros. Written by `python -m fleet_data.tasks.ingest.markets`; tests/sql/test_vin_status.py holds the file
    to this text and the macro to `with_market`."""
    from fleet_data.tasks.datasets import REGISTRY

    def accepted(markets: Collection[str]) -> set[str]:  # in_scope's set: a North American VIN where NA applies
        return set(markets) | ({NORTH_AMERICAN_VIN} if NORTH_AMERICA & set(markets) else set())

    scoped = {n: d.markets for d in REGISTRY.values() for n in dict.fromkeys((d.name, d.fetched_as))
              if d.markets is not None}
    country = "\n".join(f"        WHEN '{name}' THEN '{code}'" for name, code in COUNTRY_NAMES.items())
    applies_sql = "\n".join(f"    WHEN '{n}' THEN market IN ({_sql_list(accepted(m))})" for n, m in scoped.items())
    markets_sql = "\n".join(f"    WHEN '{n}' THEN '{', '.join(sorted(m))}'" for n, m in scoped.items())
    return f"""-- Generated from tasks/ingest/markets.py and tasks/datasets.py (python -m fleet_data.tasks.ingest.markets); do not edit.
-- The planner's rules as macros, for views that say per VIN what each dataset can answer (vin_status).

-- A code as the fleet file gives it, compared as the planner compares it: trimmed of white space, upper case.
CREATE OR REPLACE MACRO fleet_code(text) AS upper(trim(CAST(text AS VARCHAR), ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13)));

-- Where a vehicle is registered, first match wins: the file's country (ISO alpha-2 or a known name), its state
-- or province (US, then Canada, then Australia), a North American VIN (first character 1-5) or one /specs decoded
-- without its international fallback ('{NORTH_AMERICAN_VIN}'), else '{INTERNATIONAL}'.
CREATE OR REPLACE MACRO vehicle_market(vin, state, country, specs_international) AS coalesce(
    CASE fleet_code(country)
{country}
    END,
    CASE WHEN regexp_full_match(fleet_code(country), '[A-Z]{{2}}') THEN fleet_code(country) END,
    CASE WHEN fleet_code(state) IN ({_sql_list(US_STATES)}) THEN 'US'
         WHEN fleet_code(state) IN ({_sql_list(CA_PROVINCES)}) THEN 'CA'
         WHEN fleet_code(state) IN ({_sql_list(AU_STATES)}) THEN 'AU' END,
    CASE WHEN left(vin, 1) IN ('1', '2', '3', '4', '5') OR coalesce(NOT specs_international, false)
         THEN '{NORTH_AMERICAN_VIN}' ELSE '{INTERNATIONAL}' END);

-- The datasets, in the registry's order.
CREATE OR REPLACE MACRO dataset_names() AS [{", ".join(f"'{n}'" for n in REGISTRY)}];

-- Whether a dataset (or recall_details, the recalls' campaigns) answers for a vehicle of `market`.
CREATE OR REPLACE MACRO dataset_applies(dataset, market) AS CASE dataset
{applies_sql}
    ELSE true END;

-- The markets a dataset answers for, as words; NULL: every vehicle.
CREATE OR REPLACE MACRO dataset_markets(dataset) AS CASE dataset
{markets_sql}
    END;
"""


def main() -> None:
    """`python -m fleet_data.tasks.ingest.markets`: write sql/views/00_registry.sql after changing a dataset's markets."""
    REGISTRY_SQL.write_text(registry_sql(), encoding="utf-8")
    print(f"wrote {REGISTRY_SQL}")


if __name__ == "__main__":
    main()
