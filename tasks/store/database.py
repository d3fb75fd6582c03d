"""The DuckDB store: migrations, landing, named queries, runs and the Parquet export.

One process holds the working store through one `Database` (DuckDB itself refuses a
second writer process); `open_database` hands the same instance to every caller in
the process and a lock serialises writes from threads. The file at `--db` is never
written here: it is published from the working store (tasks/store/published.py). SQL lives in `sql/`:
`migrations/NNNN_name.sql` (applied once, recorded in `schema_migrations`),
`views/*.sql` (re-created on an open that finds them changed), `landing/<table>.sql` (the upsert for
one table, reading the staged chunk `incoming`), `queries/<name>.sql` and
`export/<table>.sql`. Values are always bound parameters; the only identifiers
put into SQL text are table names from `LANDING_TABLES` / `EXPORT_TABLES`.
"""

from __future__ import annotations

import hashlib
import json
import re
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import duckdb
import polars as pl
import pyarrow as pa

from fleet_data.tasks.errors import FleetError
from fleet_data.tasks.exitcodes import BUSY, USAGE
from fleet_data.tasks.store import dictionary
from fleet_data.tasks.store import lake
from fleet_data.tasks.control import memory
from fleet_data.tasks.control.failpoints import failpoint
from fleet_data.tasks.control.faults import EnvironmentFault, as_fault, damaged_database
from fleet_data.tasks.store import fileformat
from fleet_data.tasks.store.files import new_run_id, seed_working, working_path

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
CHANGES_DIR = SQL_DIR / "changes"
MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
QUERY_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

# Tables `land` accepts besides the datasets' own (tasks/datasets.py); a successful fetch of the dataset
# resolves that VIN's open failure.
OWN_LANDING_TABLES: dict[str, str | None] = {
    "vehicles": None,
    "rejected_rows": None,
    "api_calls": None,
    "failures": None,
    "recall_batches": None,
    "raw_responses": None,
    "fetch_status": None,  # resolves failures itself, per row's dataset
    "run_datasets": None,
    "plate_resolutions": None,
    "left_pending": None,  # settled by the answers and failures that come after (view vin_status)
}


def _landing_tables() -> dict[str, str | None]:
    from fleet_data.tasks.datasets import REGISTRY  # imports the connectors: not before a landing needs it

    return {**OWN_LANDING_TABLES, **{t.name: d.name if t.resolves_failures else None
                                     for d in REGISTRY.values() for t in d.tables}}


def _landing_files(table: str) -> list[Path]:
    """The SQL landing `table` runs: what changed against what is held (sql/changes/<table>.sql), the upsert
    (sql/landing/<table>.sql, or the file its declaration names), what the upsert did (<table>.landed.sql)."""
    from fleet_data.tasks.datasets import table as declared

    found = declared(table)
    if found:
        return found[1].landing_files()
    return [p for p in (CHANGES_DIR / f"{table}.sql", SQL_DIR / "landing" / f"{table}.sql",
                        CHANGES_DIR / f"{table}.landed.sql") if p.is_file()]


class _LandingTables(Mapping[str, "str | None"]):
    """Table -> the dataset a row landed there answers for (None: no failure to resolve), read at each use."""

    def __getitem__(self, table: str) -> str | None:
        return _landing_tables()[table]

    def __iter__(self) -> Iterator[str]:
        return iter(_landing_tables())

    def __len__(self) -> int:
        return len(_landing_tables())


LANDING_TABLES: Mapping[str, str | None] = _LandingTables()

# Tables exported to the Parquet lake and their partition columns, outermost first (tasks/store/lake.py): by
# VIN bucket where rows are kept per VIN (a run rewrites the buckets of the VINs it changed), by run where
# each run adds its own rows, by month for the histories analysts filter by date. Every view is exported
# too, by VIN bucket when it has a `vin` column; ownership_records (personal data) and views reading it
# are not.
EXPORT_TABLES: dict[str, list[str]] = {
    "runs": [],
    "vehicles": ["vin_bucket"],
    "rejected_rows": ["run_id"],
    "specs": ["vin_bucket"],
    "market_values": ["valued_month", "vin_bucket"],
    "trade_in_history": ["vin_bucket"],
    "recall_checks": ["run_id"],
    "recalls": ["vin_bucket"],
    "history_reports": ["vin_bucket"],
    "lien_theft_events": ["vin_bucket"],
    "api_calls": ["called_month", "run_id"],
    "failures": ["vin_bucket"],
    "recall_batches": [],
    "raw_responses": ["run_id"],
    "fetch_status": ["vin_bucket"],
    "run_datasets": ["run_id"],
    "plate_resolutions": ["run_id"],
    "changes": ["run_id"],
    "left_pending": ["vin_bucket"],
    "reports": [],
}
PRIVATE_TABLES = ("ownership_records",)

VEHICLE_COLUMNS = (
    "vin", "unit_number", "plate", "state", "mileage", "fleet", "check_digit_valid", "duplicate_count",
    "source_file", "source_row", "run_id", "fetched_at", "extra",
    "mileage_unit", "condition", "condition_rejected", "vin_source",
)  # fmt: skip


class DatabaseError(FleetError):
    """The store cannot be opened or a landing was refused; the message says why (a bug unless a kind below says)."""


class DatabaseUnusable(DatabaseError, EnvironmentFault):
    """A database file that is damaged, not a database, or where a folder or an unwritable path stands."""

    code = USAGE


def damaged_published(db: str | Path) -> str:
    """What to say of a published file DuckDB cannot read (random bytes, cut short)."""
    working = working_path(db)
    if working.is_file():
        return (f"{db}: the published database is not a DuckDB database, or a damaged one; move it aside: the next "
                f"run publishes a fresh copy from {working}")
    return (f"{db}: not a DuckDB database, or a damaged one; restore it from a backup, or move it aside to start "
            "a new database")


class DatabaseBusy(DatabaseError):
    """Another process holds the store open (DuckDB's own lock): busy, as when another run holds our lock."""

    code = BUSY


def _read_sql(*parts: str) -> str:
    return (SQL_DIR.joinpath(*parts)).read_text(encoding="utf-8")


def _schema_checksum(views: Path, migrations: list[tuple[Any, ...]], described: bool) -> str:
    """What a store's views and comments are made from: its views files, the dictionary, the migrations applied."""
    digest = hashlib.sha256(repr((sorted(migrations), described)).encode())
    for path in [*sorted(views.glob("*.sql")), *(sorted(dictionary.DICTIONARY_DIR.glob("*.toml")) if described else [])]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _statements(sql: str) -> list[str]:
    """Split one of our .sql files into statements (each ends with ';' at the end of a line)."""
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in re.split(r";\s*(?:\n|$)", body) if s.strip()]


def _bind(statement: str, params: dict[str, Any]) -> dict[str, Any]:
    """Only the parameters a statement names (DuckDB rejects unused ones)."""
    return {k: v for k, v in params.items() if re.search(rf"\${re.escape(k)}\b", statement)}


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def discover_migrations(directory: Path) -> list[Migration]:
    found = []
    for path in sorted(directory.glob("*.sql")):
        match = MIGRATION_NAME.match(path.name)
        if not match:
            raise DatabaseError(f"{path}: migration files are named NNNN_name.sql")
        found.append(Migration(int(match.group(1)), match.group(2), path))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise DatabaseError(f"{directory}: two migrations share a version number")
    return found


# The store's file is written at a publish (which checkpoints, every FLEET_PUBLISH_SECONDS of a run) and when it is
# closed, not whenever the write-ahead log passes DuckDB's 16 MB: each checkpoint writes the tables' indexes whole,
# so at 16 MB one came every nine chunks and cost more the bigger the store (at 100,000 VINs a chunk's landing
# rose from 249 to 420 ms of CPU; with checkpoints at publishes only, 204 to 242). 1 GB bounds the log when
# publishes are far apart; a killed run's log is replayed when the store is next opened, as before.
CHECKPOINTS = {"checkpoint_threshold": "1GB"}

_registry: dict[str, "Database"] = {}
_registry_lock = threading.Lock()


class Database:
    """One DuckDB connection for this process; migrations applied on open."""

    def __init__(self, path: str | Path, migrations_dir: Path | None = None, views_dir: Path | None = None, *,
                 described: bool = True):
        """`described`: the dictionary's comments written (sql/dictionary/); a scratch database that only plans
        (tasks/store/published.py `read_only_view`) needs none, and writing them costs a third of its open."""
        self.path = str(path)
        self._lock = threading.RLock()
        self._users = 1
        self._columns: dict[str, list[str]] = {}
        self._incoming: dict[str, str] = {}
        self._provenance: dict[str, tuple[int, str | None]] = {}  # run_id -> (run_seq, service), for `_stamped`
        self.full_disk: Callable[[BaseException], bool] | None = None  # set by the run holding the store
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.connection = self._connect()
        if self.path != ":memory:" and (short := fileformat.cut_short(self.connection, self.path)):
            self.connection.close()
            raise DatabaseUnusable(f"{self.path}: the runs' working store is a damaged DuckDB database ({short}); "
                                   "move it aside: the next run starts a new one from the published database beside it")
        if self.path != ":memory:" and not fileformat.readable_by_older_duckdb(self.connection):
            self.connection.close()  # a store from before: rewritten once, so publishing stays a file copy
            fileformat.rewrite(Path(self.path))
            self.connection = self._connect()
        # DuckDB's lock on the file is a POSIX lock: closing ANY descriptor of the file in this process
        # drops it (letting a second writer in). So what reads the file beside DuckDB (publish's copy) reads
        # through this one descriptor, closed only after DuckDB let go of the file.
        self.reader = os.open(self.path, os.O_RDONLY) if self.path != ":memory:" else -1
        # Timestamps are stored and shown in UTC whatever the machine's zone.
        self._run("SET TimeZone = 'UTC'")
        self.applied = self.migrate(migrations_dir or SQL_DIR / "migrations", described=False)
        self.create_views(views_dir or SQL_DIR / "views", described=described)

    def _connect(self) -> duckdb.DuckDBPyConnection:
        try:
            # A new file is written in the format every DuckDB analysts use reads (tasks/store/fileformat.py).
            return duckdb.connect(self.path, config={**fileformat.CONFIG, **memory.duckdb_config(), **CHECKPOINTS})
        except duckdb.Error as exc:
            if damaged_database(exc):
                raise DatabaseUnusable(f"{self.path}: the runs' working store is not a DuckDB database, or a damaged "
                                       "one; move it aside: the next run starts a new one from the published "
                                       "database beside it") from None
            fault = as_fault(exc, self.path)
            if fault is not None:
                raise DatabaseUnusable(str(fault)) from None
            held = "lock" in str(exc).lower()  # "Could not set lock on file ...: Conflicting lock is held in ..."
            raise (DatabaseBusy if held else DatabaseError)(
                f"{self.path}: cannot open the database, another process may hold it ({exc})") from None

    def _run(self, statement: str, params: dict[str, Any] | None = None) -> None:
        """Execute one statement and finish its result (DuckDB 2 refuses new work while one is pending)."""
        with self._lock:
            self.connection.execute(statement, params or {})
            self.connection.complete()

    def _rollback(self) -> None:
        """Undo the open transaction. A COMMIT that failed (a full disk) has ended it already: then the ROLLBACK's
        own error ("no transaction is active") would hide the one that matters, which the caller raises."""
        try:
            self._run("ROLLBACK")
        except duckdb.TransactionException:
            pass

    def _rows(self, statement: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        with self._lock:
            return self.connection.execute(statement, params or {}).fetchall()

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        with _registry_lock:
            self._users -= 1
            if self._users > 0:
                return
            _registry.pop(self._key(), None)
        with self._lock:
            # Let go of the native object, not only close it: a closed Database can outlive the run (a
            # failed task's exception, which Prefect keeps, holds the frame that held it), and a DuckDB
            # object still alive at interpreter exit makes DuckDB's bindings (nanobind) print ~40 lines
            # of "leaked instances" on stderr. Closing twice does nothing.
            connection = self.__dict__.pop("connection", None)
            if connection is not None:
                connection.close()
            reader, self.reader = getattr(self, "reader", -1), -1
            if reader >= 0:
                os.close(reader)

    def _key(self) -> str:
        return self.path if self.path == ":memory:" else str(Path(self.path).resolve())

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema ------------------------------------------------------------------------------
    def migrate(self, directory: Path, described: bool = True) -> list[int]:
        """Apply every migration not yet recorded, in order, each in its own transaction; then, `described`, the
        dictionary's comments (an open leaves them to `create_views`, which writes them once for both)."""
        with self._lock:
            for statement in _statements(_read_sql("bootstrap.sql")):
                self._run(statement)
            done = {row[0]: row[1] for row in self._rows("SELECT version, checksum FROM schema_migrations")}
            applied = []
            for migration in discover_migrations(directory):
                if migration.version in done:
                    continue
                self._run("BEGIN TRANSACTION")
                try:
                    for statement in _statements(migration.path.read_text(encoding="utf-8")):
                        self._run(statement)
                    self._run(
                        "INSERT INTO schema_migrations (version, name, checksum) VALUES ($version, $name, $checksum)",
                        {"version": migration.version, "name": migration.name, "checksum": migration.checksum},
                    )
                    self._run("COMMIT")
                except Exception as exc:
                    self._rollback()
                    raise DatabaseError(f"migration {migration.path.name} failed: {exc}") from exc
                applied.append(migration.version)
            if described:
                dictionary.apply(self.connection)  # every table and column described (sql/dictionary/)
            return applied

    def create_views(self, directory: Path, described: bool = True) -> None:
        """The views and macros of `directory`, and the dictionary's comments, unless the store has them as they are.

        A store keeps the checksum of what its views and comments were made from (`schema_views`): its views
        files, the dictionary and the migrations applied. An open that finds the same checksum, and every view
        it recorded still there, writes nothing: re-creating some 30 views and their 400 comments was half of
        opening a store (0.35 s), on every command.
        """
        with self._lock:
            made_from = _schema_checksum(directory, self._rows("SELECT version, checksum FROM schema_migrations"),
                                         described)
            if self.path != ":memory:" and self._views_as_made(made_from):
                return
            for path in sorted(directory.glob("*.sql")):
                for statement in _statements(path.read_text(encoding="utf-8")):
                    self._run(statement)
            if described:
                dictionary.apply(self.connection)  # a re-created view has lost its comments
            self._run("BEGIN TRANSACTION")
            self._run("DELETE FROM schema_views")
            self._run("INSERT INTO schema_views (checksum, views) SELECT $checksum, coalesce(list(view_name ORDER BY "
                      "view_name), []) FROM duckdb_views() WHERE database_name = current_database() "
                      "AND schema_name = 'main' AND NOT internal AND NOT temporary", {"checksum": made_from})
            self._run("COMMIT")

    def _views_as_made(self, made_from: str) -> bool:
        """The store's views were made from `made_from` and none of them is gone since."""
        made = self._rows("SELECT checksum, views FROM schema_views")
        if len(made) != 1 or made[0][0] != made_from:
            return False
        present = {row[0] for row in self._rows(
            "SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND schema_name = 'main'")}
        return set(made[0][1]) <= present

    def schema_version(self) -> int:
        rows = self._rows("SELECT max(version) FROM schema_migrations")
        return int(rows[0][0] or 0) if rows else 0

    def columns(self, table: str) -> list[str]:
        # Asked on every landing; the schema only changes through migrations, applied at open.
        if table not in self._columns:
            rows = self._rows(
                "SELECT column_name FROM information_schema.columns WHERE table_name = $table "
                "AND table_catalog = current_database() AND table_schema = 'main' ORDER BY ordinal_position",
                {"table": table},
            )
            self._columns[table] = [r[0] for r in rows]
        return self._columns[table]

    def _incoming_ddl(self, table: str) -> str:
        """`CREATE TEMP TABLE incoming (...)` with `table`'s columns and types, spelled out.

        Not `CREATE ... AS SELECT * FROM table LIMIT 0`: in DuckDB 2.0.0 a table made that way
        inside a transaction, then filled with 122,880 rows (one row group) or more, counts its
        rows but reads back none, so a big landing silently landed nothing.
        """
        if table not in self._incoming:
            rows = self._rows(
                "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = $table "
                "AND schema_name = 'main' AND database_name = current_database() ORDER BY column_index",
                {"table": table},
            )
            columns = ", ".join(f'"{name}" {data_type}' for name, data_type in rows)
            self._incoming[table] = f"CREATE OR REPLACE TEMP TABLE incoming ({columns})"
        return self._incoming[table]

    # -- named queries -----------------------------------------------------------------------
    def _query_sql(self, name: str) -> str:
        if not QUERY_NAME.match(name) or not (SQL_DIR / "queries" / f"{name}.sql").is_file():
            raise DatabaseError(f"no named query {name!r} in sql/queries/")
        return _read_sql("queries", f"{name}.sql")

    def query(self, name: str, **params: Any) -> pl.DataFrame:
        """Run `sql/queries/<name>.sql` with bound parameters and return its rows."""
        statements = _statements(self._query_sql(name))
        with self._lock:
            for statement in statements[:-1]:
                self._run(statement, _bind(statement, params))
            last = statements[-1]
            return pl.from_arrow(self.connection.sql(last, params=_bind(last, params)).to_arrow_table())  # type: ignore[return-value]

    def execute(self, name: str, **params: Any) -> None:
        """Run a named write statement (`sql/queries/<name>.sql`) in one transaction."""
        statements = _statements(self._query_sql(name))

        def body() -> None:
            for statement in statements:
                self._run(statement, _bind(statement, params))

        self._transaction(body)

    def _transaction(self, body: Callable[[], None]) -> None:
        """`body` in one transaction. Refused for space, it is tried once more if `full_disk` (the run's,
        tasks/control/resources.py) made room, halting the run: its answers and its record still land."""
        for last in (False, True):
            with self._lock:
                self._run("BEGIN TRANSACTION")
                try:
                    body()
                    self._run("COMMIT")
                    return
                except Exception as exc:
                    self._rollback()
                    if last or self.full_disk is None or not self.full_disk(exc):
                        raise

    def sql(self, text: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
        """Ad-hoc read for tests and notebooks; values must be bound through `params`."""
        with self._lock:
            return pl.from_arrow(self.connection.sql(text, params=params or {}).to_arrow_table())  # type: ignore[return-value]

    # -- runs --------------------------------------------------------------------------------
    def start_run(
        self,
        kind: str = "refresh",
        source_files: list[str] | None = None,
        parameters: dict[str, Any] | None = None,
        run_id: str | None = None,
        started_at: datetime | None = None,
        prefect_flow_run_id: str | None = None,
        service: str | None = None,
    ) -> str:
        """Record a run as `running` and return its id (starting an existing id again changes nothing).

        `prefect_flow_run_id`: the Prefect flow run executing it, when there is one (flows/naming.py). `service`:
        the service it calls (connectors/config.py `service_name`), which every row it lands carries; its
        `run_seq` is the next in this database, whatever the clock says.
        """
        run_id = run_id or new_run_id()
        self.execute(
            "start_run",
            run_id=run_id,
            kind=kind,
            source_files=[str(f) for f in source_files or []],
            parameters=json.dumps(parameters or {}, default=str),
            started_at=started_at or datetime.now(timezone.utc),
            prefect_flow_run_id=prefect_flow_run_id,
            service=service,
        )
        self._provenance.pop(run_id, None)
        return run_id

    def finish_run(
        self,
        run_id: str,
        status: str = "completed",
        *,
        counts: dict[str, int] | None = None,
        units_used: int | None = None,
        message: str | None = None,
        finished_at: datetime | None = None,
    ) -> None:
        """Close a run with its status and ingest counts; units default to the sum over its api_calls."""
        counts = counts or {}
        self.execute(
            "finish_run",
            run_id=run_id,
            status=status,
            finished_at=finished_at or datetime.now(timezone.utc),
            rows_in=counts.get("rows_in"),
            valid=counts.get("valid"),
            duplicates=counts.get("duplicates"),
            rejected=counts.get("rejected"),
            units_used=units_used,
            message=message,
        )

    def fail_run(self, run_id: str, message: str, finished_at: datetime | None = None) -> None:
        """Record a run whose flow raised as `failed`, unless it ended already; a run never started stays absent."""
        self.execute("fail_run", run_id=run_id, message=message, finished_at=finished_at or datetime.now(timezone.utc))

    def _run_started_at(self, run_id: str) -> datetime | None:
        rows = self.query("run_started_at", run_id=run_id)
        return rows.item(0, 0) if rows.height else None

    # -- landing -----------------------------------------------------------------------------
    def land(
        self,
        table: str,
        frame: pl.DataFrame | pa.Table,
        run_id: str,
        fetched_at: datetime | None = None,
    ) -> int:
        """Upsert one chunk into `table` by its natural key, in one transaction; returns rows staged.

        Landing the same chunk twice changes nothing. Columns missing from the frame land as
        NULL; a column the table does not have is refused. `run_id` is stamped on every row;
        rows without `fetched_at` get `fetched_at`, else the run's start time.
        """
        return self.land_chunk({table: frame}, run_id, fetched_at)[table]

    def land_chunk(
        self,
        frames: dict[str, pl.DataFrame | pa.Table],
        run_id: str,
        fetched_at: datetime | None = None,
    ) -> dict[str, int]:
        """Land several tables' parts of one chunk in ONE transaction: all of it or none of it.

        A crash can then never leave, say, a chunk's specs landed without the calls that paid for them.
        """
        staged = {table: self._stage(table, frame) for table, frame in frames.items()}
        # The run's start dates rows that come without a time; chunks whose rows all carry theirs (a fetch's
        # staged tables) skip asking for it.
        undated = any("fetched_at" not in c.column_names or c.column("fetched_at").null_count for c in staged.values())
        stamp = fetched_at or (self._run_started_at(run_id) if undated else None) or datetime.now(timezone.utc)
        counts = {table: chunk.num_rows for table, chunk in staged.items()}

        def body() -> None:
            for table, chunk in staged.items():
                if chunk.num_rows:
                    self._land_into(self.connection, table, chunk, run_id, stamp)
            failpoint("landing")  # crash tests: every table written, nothing committed

        try:
            self._transaction(body)
        except Exception as exc:
            raise DatabaseError(f"landing {counts} into {', '.join(staged)} failed: {exc}") from exc
        return counts

    def _stage(self, table: str, frame: pl.DataFrame | pa.Table) -> pa.Table:
        """The chunk's rows for `table` as Arrow (what DuckDB scans): a polars frame converted once."""
        if table not in LANDING_TABLES:
            raise DatabaseError(f"cannot land into {table!r}; tables: {', '.join(LANDING_TABLES)}")
        if table == "vehicles":
            frame = pack_vehicle_extras(frame if isinstance(frame, pl.DataFrame) else _polars(frame))
        chunk = frame.to_arrow() if isinstance(frame, pl.DataFrame) else frame
        known = set(self.columns(table))
        unknown = [c for c in chunk.column_names if c not in known]
        if unknown:
            raise DatabaseError(f"{table} has no column(s) {', '.join(unknown)}")
        return chunk

    def run_provenance(self, run_id: str) -> tuple[int, str | None]:
        """(run_seq, service) of run `run_id`: what each row it lands carries; (0, None) for a run not held."""
        if run_id not in self._provenance:
            row = self.query("run_provenance", run_id=run_id).row(0)
            if not row[0]:
                return 0, None  # not started (yet): asked again next time
            self._provenance[run_id] = (int(row[0]), row[1])
        return self._provenance[run_id]

    def _land_into(self, con: Any, table: str, chunk: pa.Table, run_id: str, stamp: datetime) -> None:
        chunk = _stamped(chunk, run_id, stamp, self.run_provenance(run_id), self.columns(table))
        dataset = LANDING_TABLES[table]
        con.register("chunk", chunk)
        try:
            # `table` is from LANDING_TABLES, never from input.
            self._run(self._incoming_ddl(table))
            self._run("INSERT INTO incoming BY NAME SELECT * FROM chunk")
            if chunk.column("fetched_at").null_count:
                self._run("UPDATE incoming SET fetched_at = coalesce(fetched_at, $stamp::TIMESTAMPTZ)", {"stamp": stamp})
            # What changed (sql/changes/, issue 14): compared with what is held before the upsert replaces
            # it (`<table>.sql`), or read from what the upsert did (`<table>.landed.sql`).
            for path in _landing_files(table):
                for statement in _statements(path.read_text(encoding="utf-8")):
                    self._run(statement)
            if dataset:
                for statement in _statements(_read_sql("landing", "_resolve_failures.sql")):
                    self._run(statement, {"dataset": dataset})
            self._run("DROP TABLE incoming")
        finally:
            con.unregister("chunk")

    # -- export ------------------------------------------------------------------------------
    def export_parquet(self, lake_dir: str | Path, tables: list[str] | None = None,
                       run_id: str | None = None) -> dict[str, Path]:
        """Bring the Parquet lake up to date: every table and view (or those named), each in its folder.

        Incremental (tasks/store/lake.py): only the files whose rows changed since the last export are written;
        after `run_id`, where the only change is rows of VINs it answered, those rows are added as files of their own.
        """
        return self.export_lake(lake_dir, tables, run_id).tables

    def export_lake(self, lake_dir: str | Path, names: list[str] | None = None,
                    run_id: str | None = None) -> lake.LakeExport:
        """`export_parquet`, saying which files it wrote, removed and kept."""
        views = self.exported_views()
        for name in names or []:
            if name not in EXPORT_TABLES and name not in views:
                raise DatabaseError(f"cannot export {name!r}; tables: {', '.join(EXPORT_TABLES)}; "
                                    f"views: {', '.join(views)}")
        relations = []
        for name in names or [*EXPORT_TABLES, *views]:
            partitions = EXPORT_TABLES[name] if name in EXPORT_TABLES else views[name]
            export_sql = SQL_DIR / "export" / f"{name}.sql"
            if export_sql.is_file():
                select = _statements(export_sql.read_text(encoding="utf-8"))[0]
            elif "vin_bucket" in partitions:  # `name` is from EXPORT_TABLES or the catalog, never from input
                select = f'SELECT *, vin_bucket(vin) AS vin_bucket FROM "{name}"'
            else:
                select = f'SELECT * FROM "{name}"'
            relations.append(lake.Relation(name, select, tuple(partitions)))
        appended = self.query("lake_vins_of_run", run_id=run_id) if run_id else None
        # None answered (nothing was due): no new rows to look for, and no join with them in every fingerprint.
        return lake.export(self.connection, self._lock, Path(lake_dir), relations,
                           appended if appended is not None and appended.height else None)

    def exported_views(self) -> dict[str, list[str]]:
        """The views the lake holds, with their partition columns (by VIN bucket when they have a VIN)."""
        rows = self._rows(
            "SELECT view_name, sql, list_contains((SELECT list(column_name) FROM duckdb_columns() AS c "
            "WHERE c.table_name = v.view_name AND c.schema_name = 'main'), 'vin') "
            "FROM duckdb_views() AS v WHERE NOT internal AND NOT temporary AND schema_name = 'main' ORDER BY view_name"
        )
        return {name: (["vin_bucket"] if has_vin else []) for name, text, has_vin in rows
                if not any(private in text.lower() for private in PRIVATE_TABLES)}


_UTC = pa.timestamp("us", tz="UTC")


def _stamped(chunk: pa.Table, run_id: str, stamp: datetime, provenance: tuple[int, str | None] = (0, None),
             columns: list[str] | None = None) -> pa.Table:
    """`chunk` with `run_id` on every row, and `fetched_at` (`stamp` where a row has none); where the table has
    them, the run's `run_seq` and `service` (`provenance`): a row says which run, in which order, from which service."""
    rows = chunk.num_rows
    names = chunk.column_names
    run_seq, service = provenance
    stamps = {"run_id": (run_id, pa.string()), "run_seq": (run_seq, pa.int64()), "service": (service, pa.string())}
    for name, (value, kind) in stamps.items():
        if name != "run_id" and name not in (columns or ()):
            continue
        if name == "service" and service is None and name in names:
            continue  # a run not recorded (yet): a row that says its service keeps it
        column = _repeated(value, kind, rows)
        chunk = chunk.set_column(names.index(name), name, column) if name in names else chunk.append_column(name, column)
        names = chunk.column_names
    if "fetched_at" not in names:
        chunk = chunk.append_column("fetched_at", _repeated(stamp, _UTC, rows))
    return chunk


def _repeated(value: Any, kind: pa.DataType, rows: int) -> pa.Array:
    """`value` on `rows` rows, as Arrow. Made through polars: pyarrow imports pandas, where it is installed (0.3 s),
    the first time it turns a Python value into Arrow."""
    if value is None:
        return pa.nulls(rows, kind)
    return pa.repeat(pl.Series([value]).to_arrow().cast(kind)[0], rows)


def _polars(table: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def pack_vehicle_extras(frame: pl.DataFrame) -> pl.DataFrame:
    """Roster columns beyond the known ones go into the `extra` JSON object, keyed by header."""
    others = [c for c in frame.columns if c not in VEHICLE_COLUMNS]
    if not others or "extra" in frame.columns:
        return frame
    return frame.with_columns(
        pl.struct([pl.col(c).cast(pl.String) for c in others]).struct.json_encode().alias("extra")
    ).drop(others)


def open_database(
    path: str | Path, migrations_dir: Path | None = None, views_dir: Path | None = None
) -> Database:
    """The process's Database for the working store of `path` (opened, migrated and shared; close it when done).

    `path` names the published database (`--db`), which analysts hold open read-only; writers work in
    `<path>.working` beside it and publish into `path` (tasks/store/published.py). A working store that does not
    exist yet starts as a copy of the published file.
    """
    published = path
    if str(path) != ":memory:":
        path = working_path(published)
    key = str(path) if str(path) == ":memory:" else str(Path(path).resolve())
    # Opening happens under the lock: two threads (concurrent chunk tasks) must never build two
    # instances at once, whose migrations and view re-creation would conflict in DuckDB's catalog.
    with _registry_lock:
        existing = _registry.get(key)
        if existing is not None and key != ":memory:":
            existing._users += 1
            return existing
        seeded = key != ":memory:" and seed_working(published)
        try:
            database = Database(path, migrations_dir, views_dir)
        except DatabaseUnusable:
            if not seeded:
                raise
            Path(path).unlink(missing_ok=True)  # a copy of a damaged file: no store to keep
            raise DatabaseUnusable(damaged_published(published)) from None
        if key != ":memory:":
            _registry[key] = database
        # Runs a dead process left `running` are marked when the next run takes the lock
        # (tasks/run/context.py), not here: opening proves nothing about who else is alive.
        return database
