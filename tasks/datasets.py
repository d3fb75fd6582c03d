"""The dataset registry: one declaration per dataset, and every other place derives from it.

A declaration says, in the user's word (`--datasets`, `--fresh`, `failures.dataset`): the endpoint, the
query a roster row asks with, how long an answer stays fresh, which vehicles it applies to (markets), the
tables its answers land in with their key and SQL files (`sql/shred/<table>.sql` gives a table's rows from
the staged answers, `sql/landing/<table>.sql` upserts them by the key, `sql/changes/<table>[.landed].sql`
records what changed), whether a refresh fetches it by default and which `fleet serve` schedule runs it.
The plan, the fetch, landing, backfill and re-parse, `serve`, the CLI's choices and README's table of
datasets read it (`tests/tasks/test_datasets.py` holds them to it). Adding a dataset: one `Dataset(...)`
in `REGISTRY` below, its SQL files and the migration creating its table.

`REGISTRY` is read at each use (the views below are live), so a dataset registered at run time (a test's)
is planned, fetched, landed and re-parsed like the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, Mapping, Sequence, TypeVar

from fleet_data.connectors import ENDPOINTS, AsyncVehicleDataClient

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"

Call = Callable[[AsyncVehicleDataClient, str, Mapping[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class Table:
    """A table a dataset's answers land in: its key, and the SQL files that shred and land its rows."""

    name: str
    key: tuple[str, ...] = ("vin",)  # the natural key the landing SQL upserts by
    shred: Path | None = None  # default sql/shred/<name>.sql
    landing: Path | None = None  # default sql/landing/<name>.sql
    resolves_failures: bool = True  # a row landed here resolves the VIN's open failure of the dataset

    def __post_init__(self) -> None:
        object.__setattr__(self, "shred", self.shred or SQL_DIR / "shred" / f"{self.name}.sql")
        object.__setattr__(self, "landing", self.landing or SQL_DIR / "landing" / f"{self.name}.sql")

    def landing_files(self) -> list[Path]:
        """The SQL landing runs, in order: what changed against what is held, the upsert, what the upsert did."""
        assert self.landing is not None
        return [p for p in (SQL_DIR / "changes" / f"{self.name}.sql", self.landing,
                            SQL_DIR / "changes" / f"{self.name}.landed.sql") if p.is_file()]


@dataclass(frozen=True)
class Dataset:
    name: str  # the user's word, as in `--datasets` and the `failures.dataset` column
    endpoint: str  # the endpoint's name in connectors.ENDPOINTS
    call: Call
    request: Callable[[Mapping[str, Any]], dict[str, Any]] = lambda row: {}
    # The markets the service answers this dataset for (tasks/ingest/markets.py); None = every vehicle.
    # Other vehicles are `not_applicable`: planned out, never called, never failed.
    markets: frozenset[str] | None = None
    # The query a chunk's call sends (beyond the key): the typed `call`'s, without its model.
    params: Callable[[str, Mapping[str, Any]], dict[str, Any]] = lambda vin, row: {"vin": vin}
    # The top-level members the answer must have the type of, when present (the models' shape, checked
    # without building them): a wrong-shape answer fails its call, as a model's validation would.
    shape: Mapping[str, type | tuple[type, ...]] = field(default_factory=dict)
    freshness: timedelta = timedelta(days=30)  # how long an answer stays fresh (`--fresh NAME=AGE`)
    tables: tuple[Table, ...] = ()  # where its answers land, in landing order
    default: bool = True  # fetched by a refresh that names no `--datasets`
    schedule: str | None = None  # the `fleet serve` deployment that refreshes it: "weekly" or "monthly"
    # The name its per-VIN fetch goes by (journals, progress, `fetch_chunk`) when it is not `name`.
    fetched_as: str = ""
    # Planned and paid through a batch endpoint (1 unit per VIN) before the per-VIN `endpoint`.
    batch_endpoint: str | None = None
    # Its request sends the mileage: the plan gives its due VINs the one valuations use (view vehicle_mileage).
    asks_mileage: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "fetched_as", self.fetched_as or self.name)


# Where `/v2/marketvalue` takes a `state` (a US state, DC included) and where it counts kilometres.
US_STATES = frozenset(
    "AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ NM NY NC ND "
    "OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY".split()
)
CANADIAN_PROVINCES = frozenset("AB BC MB NB NL NS NT NU ON PE QC SK YT".split())
KM_PER_MILE = 1.609344


def valuation_request(row: Mapping[str, Any]) -> dict[str, Any]:
    """What a valuation is asked with, by the spec's rules for `/v2/marketvalue`, and where that came from.

    The spec's only region is `state`, "optional US state": sent only for a US state, never a Canadian
    province. A vehicle whose market is Canada (tasks/ingest/markets.py: the file's country, else its
    province) is valued in kilometres, any other in miles ("miles in the US, kilometers in Canada"): the
    mileage is converted from the unit the fleet file gave (`mileage_unit`). A unit the file does not give
    is miles for a vehicle not known to be Canadian (the service's default market); for a Canadian one it
    cannot be known, so no mileage is sent (the plan counts and names those vehicles: `mileage_unit_unknown`).
    The condition as the file gave it (ingest keeps only the spec's values), none otherwise: nothing is assumed.
    `mileage_unit`, `mileage_source` (fleet_file or history: the view `vehicle_mileage`) and `country` are ours
    (recorded with the valuation), not parameters of the service.
    """
    state = str(row.get("state") or "").strip().upper()
    canadian = _canadian(row)
    country = "CA" if canadian else "US" if row.get("market") == "US" or state in US_STATES else None
    mileage, unit, source = row.get("mileage"), None, row.get("mileage_source")
    if mileage is not None and not mileage_unit_unknown(row):
        unit = "km" if canadian else "mi"
        given = row.get("mileage_unit") or "mi"
        if given != unit:
            mileage = round(mileage * KM_PER_MILE if unit == "km" else mileage / KM_PER_MILE)
    else:
        mileage = source = None
    return {"state": state if state in US_STATES else None, "mileage": mileage, "mileage_unit": unit,
            "condition": row.get("condition") or None, "mileage_source": source, "country": country}


def _canadian(row: Mapping[str, Any]) -> bool:
    """Registered in Canada: its market (tasks/ingest/markets.py), else a row's province."""
    market = row.get("market")
    return market == "CA" or (market is None and str(row.get("state") or "").strip().upper() in CANADIAN_PROVINCES)


def mileage_unit_unknown(row: Mapping[str, Any]) -> bool:
    """A mileage whose unit cannot be known: a Canadian vehicle's, the file saying neither miles nor km."""
    return row.get("mileage") is not None and not row.get("mileage_unit") and _canadian(row)


def _value_params(vin: str, row: Mapping[str, Any]) -> dict[str, Any]:
    asked = valuation_request(row)
    return {"vin": vin, "state": asked["state"], "mileage": asked["mileage"], "condition": asked["condition"]}


def _value(client: AsyncVehicleDataClient, vin: str, row: Mapping[str, Any]) -> Awaitable[Any]:
    asked = valuation_request(row)
    return client.market_value(vin, state=asked["state"], mileage=asked["mileage"], condition=asked["condition"])


_LIST, _OBJECT = list, dict
_HISTORY_SHAPE = {k: _LIST for k in ("junkAndSalvageInformation", "insuranceInformation", "brandsInformation",
                                      "currentTitleInformation", "historyInformation")}

# In the order plans, summaries, `--datasets` choices and README's table list them.
REGISTRY: dict[str, Dataset] = {
    d.name: d
    for d in (
        # Every vehicle: "Decode a 17-character VIN into specifications ..., with an international-VIN
        # fallback" (disableIntVINDecoding is never sent, so a non-US VIN is decoded by the fallback).
        # Specs do not change: a year.
        Dataset("specs", "specs", lambda c, vin, row: c.specs(vin),
                shape={"attributes": _OBJECT, "colors": _LIST, "equipment": _OBJECT, "warranties": _LIST},
                freshness=timedelta(days=365), tables=(Table("specs"),), schedule="monthly"),
        # US and Canada: "state (optional US state ...)", "mileage (... miles in the US, kilometers in Canada)".
        # Values move monthly. A valuation is kept per day and per request (the history of a vehicle's value).
        Dataset("market_value", "market-value", _value, valuation_request, markets=frozenset({"US", "CA"}),
                params=_value_params, shape={"mileage_list": _LIST, "add_deduct_list": _LIST},
                freshness=timedelta(days=30), schedule="monthly", asks_mileage=True,
                tables=(Table("market_values", key=("vin", "valued_on", "state", "mileage", "mileage_unit",
                                                    "condition")),
                        # The trade-in values of the months before it that every answer carries: the
                        # fleet's value trend from the first run (the valuation resolves the failure). Each
                        # answer's months are kept as observed (appended): a later answer restates them.
                        Table("trade_in_history", key=("vin", "month", "fetched_at"), resolves_failures=False))),
        # US: the report is title records ("junkAndSalvageInformation", "brandsInformation",
        # "currentTitleInformation"), which US states keep; the issue lists it with the US-only services.
        Dataset("history", "history", lambda c, vin, row: c.history(vin), markets=frozenset({"US"}),
                shape=_HISTORY_SHAPE, freshness=timedelta(days=90), tables=(Table("history_reports"),),
                schedule="monthly"),
        # US: "Lien and theft records by VIN (US)".
        Dataset("lien_theft", "lien-theft", lambda c, vin, row: c.lien_theft(vin), markets=frozenset({"US"}),
                shape={"events": _LIST}, freshness=timedelta(days=30),
                tables=(Table("lien_theft_events", key=("vin", "event_index")),), schedule="monthly"),
        # North America, for the batch check and the per-VIN details alike: the campaigns are NHTSA's
        # ("nhtsa_campaign_number"), and North American VINs are the ones NHTSA's rules shape. Checked
        # weekly, by the batch API (tasks/recalls/batches.py); the VINs with recalls are then detailed per
        # VIN (`/v1/recalls`, tasks/recalls/details.py). Campaigns land before the check that closes what it
        # no longer lists: new and closed campaigns are then told apart as they land (sql/changes/).
        Dataset("recalls", "recalls", lambda c, vin, row: c.recalls(vin),
                markets=frozenset({"US", "CA", "MX"}), shape={"data": _OBJECT}, freshness=timedelta(days=7),
                tables=(Table("recalls", key=("vin", "nhtsa_campaign_number"), resolves_failures=False),
                        Table("recall_checks", key=("vin", "run_id", "checked_via"))),
                schedule="weekly", fetched_as="recall_details", batch_endpoint="recalls-batch-submit"),
        # Every vehicle: "Registered-owner lookup by VIN (enterprise plans only)" names no country.
        # Personal data, and enterprise plans only: fetched only when asked for.
        Dataset("ownership", "ownership", lambda c, vin, row: c.ownership(vin), shape={"owners": _LIST},
                freshness=timedelta(days=90), tables=(Table("ownership_records"),), default=False),
    )
}

# -- what the rest of the code reads, derived at each read -------------------------------------------------


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def default_names() -> tuple[str, ...]:
    return tuple(n for n, d in REGISTRY.items() if d.default)


def scheduled(schedule: str) -> list[str]:
    return [n for n, d in REGISTRY.items() if d.schedule == schedule]


def by_fetch_name() -> dict[str, Dataset]:
    """Declarations by the name their per-VIN fetch goes by (`recall_details` for recalls)."""
    return {d.fetched_as: d for d in REGISTRY.values()}


def table(name: str) -> tuple[Dataset, Table] | None:
    """The dataset whose answers land in table `name`, and that table's declaration (None: not a data table)."""
    for d in REGISTRY.values():
        for t in d.tables:
            if t.name == name:
                return d, t
    return None


K = TypeVar("K")
V = TypeVar("V")


class Live(Mapping[K, V]):
    """A read-only mapping computed from the registry at each read (a dataset registered later is in it)."""

    def __init__(self, make: Callable[[], Mapping[K, V]]) -> None:
        self._make = make

    def __getitem__(self, key: K) -> V:
        return self._make()[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._make())

    def __len__(self) -> int:
        return len(self._make())

    def __repr__(self) -> str:
        return repr(dict(self._make()))


class LiveNames(Sequence[str]):
    """A read-only sequence of names computed from the registry at each read."""

    def __init__(self, make: Callable[[], Sequence[str]]) -> None:
        self._make = make

    def __getitem__(self, index: Any) -> Any:
        return self._make()[index]

    def __len__(self) -> int:
        return len(self._make())

    def __iter__(self) -> Iterator[str]:
        return iter(self._make())

    def __contains__(self, value: object) -> bool:
        return value in self._make()

    def __eq__(self, other: object) -> bool:
        return tuple(self._make()) == (tuple(other) if isinstance(other, (tuple, list, LiveNames)) else other)

    def __hash__(self) -> int:
        return hash(tuple(self._make()))

    def __repr__(self) -> str:
        return repr(tuple(self._make()))


def docs_table() -> str:
    """README's table of datasets (tests/tasks/test_datasets.py holds the README to it)."""
    lines = ["| dataset | endpoint | fresh for | applies to vehicles registered in | lands in (key) | by default |",
             "|---|---|---|---|---|---|"]
    for d in REGISTRY.values():
        where = "anywhere" if d.markets is None else ", ".join(sorted(d.markets))
        endpoint = f"`{ENDPOINTS[d.endpoint].path}`"
        if d.batch_endpoint:  # checked in batches first; the per-VIN endpoint details what the batch found
            endpoint = f"`{ENDPOINTS[d.batch_endpoint].path}`, then {endpoint}"
        tables = ", ".join(f"`{t.name}` ({', '.join(t.key)})" for t in d.tables)
        hours = d.freshness.total_seconds() / 3600
        fresh = f"{hours / 24:g} days" if hours % 24 == 0 else f"{hours:g} hours"
        lines.append(f"| {d.name} | {endpoint} | {fresh} | {where} | {tables} | "
                     f"{'yes' if d.default else 'no'} |")
    return "\n".join(lines)


# By the name a per-VIN fetch goes by (`recall_details` for recalls), read live from the registry.
DATASETS: Mapping[str, Dataset] = Live(by_fetch_name)


# The registry's names, read at each use.
ALL_DATASETS: Sequence[str] = LiveNames(names)
DEFAULT_DATASETS: Sequence[str] = LiveNames(default_names)
# How long an answer stays fresh: each declaration's `freshness`.
DEFAULT_FRESHNESS: Mapping[str, timedelta] = Live(lambda: {n: d.freshness for n, d in REGISTRY.items()})
# How long a 404 "no data" stays fresh, whatever the dataset (never longer than the dataset's own window).
NO_DATA = "no_data"
DEFAULT_NO_DATA_FRESHNESS = timedelta(days=7)


# One grammar for every duration an option takes (`--fresh`, `--retry-window`): seconds, or a number with a unit.
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds(text: Any) -> float:
    """A duration as the options write it, in seconds: "90" or "90s", "3m", "12h", "14d"; ValueError otherwise."""
    written = str(text).strip().lower()
    amount, unit = (written[:-1], DURATION_UNITS[written[-1]]) if written[-1:] in DURATION_UNITS else (written, 1)
    try:
        value = float(amount) * unit
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):  # nan, inf and negatives too
        raise ValueError(f"{text!r} is not a duration")
    return value


def parse_freshness(overrides: dict[str, str] | None) -> dict[str, timedelta]:
    """`{"market_value": "14d", "recalls": "12h", "no_data": "3d"}` -> windows; unknown datasets are refused."""
    windows = {**DEFAULT_FRESHNESS, NO_DATA: DEFAULT_NO_DATA_FRESHNESS}
    for name, text in (overrides or {}).items():
        if name not in windows:
            raise ValueError(f"unknown dataset {name!r} in freshness; choose from {', '.join(ALL_DATASETS)} or {NO_DATA}")
        try:
            windows[name] = timedelta(seconds=seconds(text))
        except ValueError:
            raise ValueError(f"freshness {text!r} for {name}: use a number of seconds, or one with s, m, h or d "
                             "(e.g. 30d)") from None
    return windows
