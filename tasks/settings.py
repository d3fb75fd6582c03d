"""Settings: a refresh's options declared once, and one tree for everything read from the environment.

`RefreshOptions` is the model of a run's options. Each field carries its default, its help text, its
grammar and, in its `Cli` mark, the commands it applies to and whether a team may set it in the
project file and `FLEET_<NAME>`. Everything else derives from it: the commands' flags
(flows/config.py `add_flags`), the project file's keys and the `FLEET_*` variables (`SharedOptions`),
the flow's parameter (flows/refresh.py takes `(paths, options)`), the deployments' parameters
(prefect.yaml, flows/serve.py) and the README's table (`options_table`). tests/flows/test_options.py
keeps them equal.

The tree (`FleetSettings`, pydantic-settings as Prefect's own): the service (connectors' `ServiceSettings`:
VDS_*, environment then `.env`), the shared options (flag > FLEET_* > project file > default) and the
process (`ProcessSettings`: FLEET_PUBLISH_SECONDS, the retry window of worker processes, failpoints).
No other module reads `os.environ`; `exported` is the one place that writes it, for the run's tasks and
child processes. Every number is finite and in range: `nan` and `inf` are refused before a run starts.

Fast to import and free of Prefect (`fleet status` and dry runs read it): the dataset registry is
imported only when a value is checked.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import os
import tomllib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Sequence

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from fleet_data.tasks.errors import UsageError

if TYPE_CHECKING:
    from fleet_data.connectors.config import ServiceSettings, Settings  # imported when read: httpx is slow to import

DEFAULT_DB = "data/fleet.duckdb"
DEFAULT_LAKE = "data/lake"
DEFAULT_VALUE_MOVE = 10.0  # percent: a valuation that moved more than this from the vehicle's previous one
DEFAULT_RETRY_WINDOW = 180.0  # seconds: a faulted run ends within its fault-free time + 3 minutes
DEFAULT_PUBLISH_SECONDS = 120.0
DEFAULT_CHUNK_SIZE = 5000  # VINs per fetch task (`--chunk-size`)
DEFAULT_PREFECT_IDLE_SECONDS = 600.0  # the shared Prefect server's wait for the next command
DEFAULT_MIN_FREE_MB = 64.0  # headroom a run keeps on every disk it writes (tasks/control/resources.py)
DEFAULT_RESERVE_MB = 8.0  # set aside at the start, given back on a full disk so paid answers still reach the disk
# Clocks of two machines may differ this much without it meaning anything: an answer dated up to this far in the
# future still counts fresh, and a run may start this far behind the database's last run.
CLOCK_TOLERANCE = timedelta(minutes=5)
MAX_BATCH_VINS = 10_000  # the spec's limit per recalls batch
ENV_PREFIX = "FLEET_"
FILE_NAME = "fleet.toml"
SECRET_WORDS = ("key", "secret", "token", "password")
COMMANDS = ("refresh", "backfill", "status", "serve")  # the commands whose options come from here


class SettingsError(UsageError):
    """A setting that cannot be used; one line naming where it came from (exit code 2 in `fleet`)."""


# --- grammars: each takes what a flag, a variable, the file or Prefect gives, and says what is wrong --------


def _whole(value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{value!r} is not a whole number; write e.g. 8")
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a whole number; write e.g. 8") from None
    if number < least:
        raise ValueError(f"{number} must be {least} or more")
    return number


def positive(value: Any) -> int:
    return _whole(value, 1)


def budget(value: Any) -> int | None:
    return None if value is None else _whole(value, 0)


def batch_vins(value: Any) -> int:
    number = _whole(value, 0)
    if not 1 <= number <= MAX_BATCH_VINS:
        raise ValueError(f"a recall batch holds 1 to {MAX_BATCH_VINS:,} VINs (the service's limit); "
                         f"use {MAX_BATCH_VINS} or less")
    return number


def number(value: Any, *, above: float | None = None, least: float | None = None, example: str = "10") -> float:
    """A finite number (nan and inf are not settings), above or at least a bound."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{value!r} is not a number; write e.g. {example}")
    try:
        result = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number; write e.g. {example}") from None
    if not math.isfinite(result):
        raise ValueError(f"{value!r} is not a finite number; write e.g. {example}")
    if above is not None and not result > above:
        raise ValueError(f"{value!r} must be above {above:g}; write e.g. {example}")
    if least is not None and not result >= least:
        raise ValueError(f"{value!r} must be {least:g} or more; write e.g. {example}")
    return result


def percentage(value: Any) -> float:
    share = number(value, example="10")
    if not share > 0:
        raise ValueError("a value move is a percentage above 0; use e.g. 10 for 10%")
    return share


def duration(value: Any) -> float | None:
    """Seconds, in `--fresh`'s grammar (tasks/datasets.py `seconds`: "90", "90s", "3m", "1h", "1d"); "off" (or None)
    is no bound."""
    from fleet_data.tasks.datasets import seconds

    if value is None:
        return None
    text = str(value).strip().lower() if isinstance(value, (int, float, str)) and not isinstance(value, bool) else ""
    if text == "off":
        return None
    try:
        return seconds(text)
    except ValueError:
        raise ValueError(f"{value!r} is not a duration; write seconds or a number with s, m, h or d (e.g. 3m), "
                         "or off") from None


def dataset_list(value: Any) -> list[str]:
    """Names from the registry (tasks/datasets.py), as a list or comma-separated; none given: the defaults."""
    from fleet_data.tasks.datasets import ALL_DATASETS, DEFAULT_DATASETS

    chosen = [d.strip() for d in value.split(",")] if isinstance(value, str) else value
    if not isinstance(chosen, (list, tuple)) or not all(isinstance(d, str) for d in chosen):
        raise ValueError("a list of datasets, e.g. [\"specs\", \"recalls\"]")
    unknown = [d for d in chosen if d and d not in ALL_DATASETS]
    if unknown:
        raise ValueError(f"unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(ALL_DATASETS)}")
    return [d for d in chosen if d] or list(DEFAULT_DATASETS)


def fresh_windows(value: Any) -> dict[str, str]:
    """`{dataset: "14d"}`, or `dataset=14d,...` (a variable); checked with the plan's own grammar."""
    from fleet_data.tasks.datasets import parse_freshness

    if value is None:
        return {}
    if isinstance(value, str):
        items = [i.strip() for i in value.split(",") if i.strip()]
        if not all("=" in i for i in items):
            raise ValueError("write DATASET=AGE,..., e.g. market_value=14d,no_data=3d")
        value = dict(i.split("=", 1) for i in items)
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError("a table of dataset = \"AGE\", e.g. [fresh] market_value = \"14d\"")
    parse_freshness(dict(value))  # raises ValueError naming the dataset or the window
    return {str(k): v for k, v in value.items()}


def switch(value: Any) -> bool:
    """true or false as such (a variable's words are read by `EnvironmentSource`)."""
    if not isinstance(value, bool):
        raise ValueError(f"{value!r} is not true or false (write it without quotes)")
    return value


def text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not text; write it in quotes")
    return value


def blank_is_none(value: Any) -> str | None:
    return None if value in (None, "") else text(value)


# --- the model -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cli:
    """Where an option is given besides the flow's parameter."""

    commands: tuple[str, ...] = ("refresh",)  # the commands with its flag
    shared: bool = False  # also `FLEET_<NAME>` and the project file: a team's default, not a one-run choice
    metavar: str | None = None
    path: bool = False  # in the project file, relative to the file's folder
    grammar: bool = False  # the flag's text is parsed by the field's grammar (argparse takes it as text)


RUNS = ("refresh", "backfill")
Datasets = Annotated[list[str], BeforeValidator(dataset_list)]
Count = Annotated[int, BeforeValidator(positive), Field(ge=1)]
OptionalText = Annotated[str | None, BeforeValidator(blank_is_none)]
Switch = Annotated[bool, BeforeValidator(switch)]


class RunOptions(BaseModel):
    """What every run that calls and lands takes: where it writes, how much at once, its budget."""

    model_config = ConfigDict(extra="forbid")

    db: Annotated[str, BeforeValidator(text), Cli(("refresh", "backfill", "status", "serve"), shared=True, path=True),
                  Field(description="the published DuckDB file")] = DEFAULT_DB
    lake: Annotated[str | None, BeforeValidator(blank_is_none), Cli(("refresh", "backfill", "serve"), shared=True, path=True),
                    Field(description="Parquet export folder ('' or null: no export)")] = DEFAULT_LAKE
    concurrency: Annotated[Count, Cli(RUNS, shared=True), Field(description="calls in flight per dataset")] = 32
    # 5,000: a task's fixed costs (Prefect's task run, a shredding statement's plan, a landing transaction) are
    # paid per chunk; at 500 they were most of a 10,000-VIN run's CPU (docs/benchmarks.md, issue 27).
    chunk_size: Annotated[Count, Cli(RUNS, shared=True), Field(description="VINs per task")] = DEFAULT_CHUNK_SIZE
    max_units: Annotated[int | None, BeforeValidator(budget), Cli(RUNS), Field(
        description="refuse a plan that costs more; stop cleanly when reached")] = None
    allow_clock_behind: Annotated[Switch, Cli(RUNS, shared=True), Field(
        description=f"run even though this clock is more than {CLOCK_TOLERANCE.seconds // 60} minutes behind the "
                    "database's last run (say so "
                    "only when this clock is right and that run's was ahead; otherwise set the clock right)")] = False


class RefreshOptions(RunOptions):
    """The options of a refresh (`fleet refresh`, a served or deployed run): all but the files and the run id."""

    datasets: Annotated[Datasets, Cli(shared=True, metavar="NAME,...", grammar=True)] = Field(
        default_factory=lambda: dataset_list([]), description="the datasets to keep fresh, comma-separated")
    fresh: Annotated[dict[str, str], BeforeValidator(fresh_windows), Cli(shared=True, metavar="DATASET=AGE")] = Field(
        default_factory=dict, description="freshness window per dataset, e.g. market_value=14d, or no_data=3d for "
                                          "404 answers: seconds, or with s, m, h or d (repeatable)")
    batch_size: Annotated[int, BeforeValidator(batch_vins), Cli(shared=True), Field(
        ge=1, le=MAX_BATCH_VINS, description=f"VINs per recall batch (at most {MAX_BATCH_VINS:,})")] = MAX_BATCH_VINS
    recall_details: Annotated[Literal["vin", "model"], Cli(shared=True), Field(
        description="campaigns of VINs with recalls: each VIN's own lookup, or its model's list when the counts "
                    "match (cheaper; marked likely, not confirmed)")] = "vin"
    plates: Annotated[Switch, Cli(shared=True), Field(
        description="look up VINs by plate for rows that have a plate and no VIN (--no-plates: they are rejected)")] = True
    retry_window: Annotated[float | None, BeforeValidator(duration), Cli(shared=True, metavar="DURATION", grammar=True),
                            Field(description="once every first call is made, retries get this long more, then what "
                                              "still waits is pending for the next run: seconds, or with s, m, h or d "
                                              "(off or null: no bound)")] = DEFAULT_RETRY_WINDOW
    force: Annotated[Switch, Cli(), Field(description="ignore freshness: fetch every VIN again")] = False
    dry_run: Annotated[Switch, Cli(RUNS), Field(description="print the plan and its cost; make no call")] = False
    vin_column: Annotated[OptionalText, Cli(), Field(
        description="name of the VIN column when it cannot be recognised")] = None
    webhook_url: Annotated[OptionalText, Cli(metavar="URL"), Field(
        description="https URL the service notifies when a recall batch finishes")] = None
    webhook_listen: Annotated[OptionalText, Cli(metavar="HOST:PORT"), Field(
        description="receive that notification here (behind --webhook-url) instead of polling")] = None
    notify: Annotated[OptionalText, Cli(metavar="URL"), Field(
        description="post what changed to this webhook (JSON with a Slack-compatible text); nothing when nothing "
                    "changed")] = None
    value_move: Annotated[float, BeforeValidator(percentage), Cli(metavar="PERCENT"), Field(
        gt=0, description="a value that moved more than this percentage from the vehicle's previous one is a "
                          "change")] = DEFAULT_VALUE_MOVE
    workers: Annotated[int | None, BeforeValidator(lambda v: None if v is None else positive(v)), Cli(metavar="N"),
                       Field(description="fetch in N processes of this machine (default: the flow's threads); "
                                         "--concurrency is per process")] = None
    dask: Annotated[OptionalText, AfterValidator(lambda v: _extra(_url(v, "tcp://127.0.0.1:8786"), "dask")), Cli(metavar="ADDRESS"),
                    Field(description="fetch on an existing Dask cluster, e.g. tcp://10.0.0.5:8786 "
                                      "(install the wheel on every worker; the key and credentials go from here: docs/dask.md)")] = None
    staging: Annotated[OptionalText, AfterValidator(lambda v: _extra(_url(v, "s3://bucket/prefix"), "s3")), Cli(metavar="URL"),
                       Field(description="stage fetched answers on object storage, e.g. s3://bucket/prefix "
                                         "(default: beside --db)")] = None

    def run_parameters(self) -> dict[str, Any]:
        """What the run records as its parameters (`runs.parameters`): never a URL that may hold a credential."""
        return {"datasets": self.datasets, "max_units": self.max_units, "force": self.force, "dry_run": self.dry_run,
                "freshness": self.fresh or None, "chunk_size": self.chunk_size, "batch_size": self.batch_size,
                "recall_details_by": self.recall_details, "plates": self.plates, "value_move": self.value_move,
                "allow_clock_behind": self.allow_clock_behind}


class BackfillOptions(RunOptions):
    """The options of a backfill (`fleet backfill`): which VINs, of which datasets, fetched again.

    The VINs are `vins`, or those of `vins_file` (a long list stays out of Prefect's parameters), or the
    open failures of run `failures_of`, or of every run (`all_failures`).
    """

    datasets: Annotated[list[str] | None, BeforeValidator(lambda v: None if v is None else dataset_list(v)), Field(
        description="the datasets to fetch again (default: those with failures, or the refresh's for VINs)")] = None
    vins: Annotated[list[str] | None, Field(description="the VINs to fetch again")] = None
    vins_file: Annotated[OptionalText, Field(description="a file of VINs (text, CSV or Parquet)")] = None
    failures_of: Annotated[OptionalText, Field(description="the run whose open failures to fetch again")] = None
    all_failures: Annotated[Switch, Field(description="every open failure, of every run")] = False

    def run_parameters(self) -> dict[str, Any]:
        """What the run records as its parameters (`runs.parameters`): a count of VINs, not the list."""
        return {"datasets": self.datasets, "vins": None if self.vins is None else len(self.vins),
                "vins_file": self.vins_file, "failures_of": self.failures_of, "all_failures": self.all_failures,
                "max_units": self.max_units, "chunk_size": self.chunk_size, "allow_clock_behind": self.allow_clock_behind}


def _url(value: str | None, example: str) -> str | None:
    if value is not None and "://" not in value:
        raise ValueError(f"{value!r} is not an address; give one like {example}")
    return value


# The extras an option needs (pyproject.toml's optional-dependencies): the modules it imports, by extra.
EXTRAS = {"dask": ("prefect_dask", "distributed"), "s3": ("s3fs", "botocore")}


def _extra(value: str | None, extra: str) -> str | None:
    """`value`, when the extra it needs is installed (`s3`: only for an s3:// URL); else one line naming the extra."""
    if value is None or (extra == "s3" and not value.startswith("s3://")):
        return value
    import importlib.util

    missing = [module for module in EXTRAS[extra] if importlib.util.find_spec(module) is None]
    if missing:
        raise ValueError(f"needs the `{extra}` extra ({', '.join(missing)} not installed): "
                         f"pip install 'fleet-data[{extra}]'")
    return value


def cli_of(info: FieldInfo) -> Cli:
    return next(m for m in info.metadata if isinstance(m, Cli))


def options_for(command: str) -> dict[str, FieldInfo]:
    """The options a command has a flag for, in the model's order."""
    return {name: info for name, info in RefreshOptions.model_fields.items() if command in cli_of(info).commands}


def shared_options() -> dict[str, FieldInfo]:
    """The options `FLEET_<NAME>` and the project file may set."""
    return {name: info for name, info in RefreshOptions.model_fields.items() if cli_of(info).shared}


def env_name(name: str) -> str:
    return ENV_PREFIX + name.upper()


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def check(name: str, value: Any, where: str) -> Any:
    """One option's value, checked by the model's own grammar; a `SettingsError` naming `where` if it cannot be used."""
    if isinstance(value, str) and "\x00" in value:  # TOML's "\u0000": no path, URL or name can hold one
        raise SettingsError(f"{where}: holds a NUL character (\\u0000); remove it")
    try:
        validated = RefreshOptions.__pydantic_validator__.validate_assignment(
            RefreshOptions.model_construct(), name, value)
    except ValidationError as exc:
        raise SettingsError(f"{where}: {_reason(exc)}") from None
    return getattr(validated, name)


def _reason(exc: ValidationError) -> str:
    first = exc.errors()[0]
    error = (first.get("ctx") or {}).get("error")
    return str(error) if error is not None else first["msg"]


# --- the project file ----------------------------------------------------------------------------


@dataclass
class ProjectFile:
    path: Path | None = None
    values: dict[str, Any] = field(default_factory=dict)

    def where(self, key: str) -> str:
        return f"{self.path}: {key}"


def find_project_file(start: Path | None = None) -> Path | None:
    """The nearest `fleet.toml`, or `pyproject.toml` holding `[tool.fleet]`, from `start` up."""
    folder = (start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / FILE_NAME).is_file():
            return candidate / FILE_NAME
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file() and "fleet" in _read(pyproject).get("tool", {}):
            return pyproject
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML ({exc}); fix the file") from None
    except UnicodeDecodeError as exc:  # TOML is UTF-8: a file saved as Latin-1 or UTF-16, or binary
        raise SettingsError(f"{path}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start:exc.start + 1]!r}); "
                            "save it as UTF-8") from None
    except OSError as exc:
        raise SettingsError(f"{path}: unreadable ({exc.strerror or exc})") from None


def load_project_file(start: Path | None = None) -> ProjectFile:
    """Every entry of the nearest project file, checked: unknown keys and secrets refused, paths made usable."""
    path = find_project_file(start)
    if path is None:
        return ProjectFile()
    table = _read(path)
    if path.name == "pyproject.toml":
        table = table["tool"]["fleet"]
        if not isinstance(table, dict):
            raise SettingsError(f"{path}: [tool.fleet] must be a table")
    project, known = ProjectFile(path), shared_options()
    for raw_key, value in table.items():
        key, where = raw_key.replace("-", "_"), project.where(raw_key)
        if key not in known:
            if any(word in key.lower() for word in SECRET_WORDS):
                raise SettingsError(f"{where}: secrets do not belong in the project file (it is shared, committed); "
                                    "set VDS_API_KEY in the environment or in .env, and remove it from the file")
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise SettingsError(f"{where}: unknown setting; {hint}known: {', '.join(known)}")
        parsed = check(key, value, where)
        if cli_of(known[key]).path and parsed and not Path(parsed).is_absolute():
            parsed = _beside(path, parsed)
        project.values[key] = parsed
    return project


def _beside(project_file: Path, relative: str) -> str:
    """A path written in the file, relative to the file's folder (kept as written when that is here)."""
    folder = project_file.parent
    return relative if folder == Path.cwd().resolve() else str(folder / relative)


# --- the shared options: flag > FLEET_* > project file > default ---------------------------------

_command: ContextVar[str] = ContextVar("fleet_command", default="refresh")
_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class EnvironmentSource(PydanticBaseSettingsSource):
    """`FLEET_<NAME>` for the command's shared options, each checked and named on refusal; empty is unset."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # everything is read in __call__

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, info in options_for(_command.get()).items():
            raw = os.environ.get(env_name(name), "")
            if not cli_of(info).shared or not raw:
                continue
            given: Any = raw
            if info.annotation is bool and raw.strip().lower() in _WORDS:
                given = _WORDS[raw.strip().lower()]
            values[name] = check(name, given, env_name(name))
        return values


class ProjectFileSource(PydanticBaseSettingsSource):
    """The project file's entries for the command's options (the whole file is checked, whatever the command)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        values = load_project_file().values
        return {k: v for k, v in values.items() if k in options_for(_command.get())}


class _SharedBase(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore")

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Flags (keyword arguments) > FLEET_* > the project file; no `.env` or secrets folder for options.
        return init_settings, EnvironmentSource(settings_cls), ProjectFileSource(settings_cls)


# The tree's options group: the model's shared fields, declared there once. Flags come in as keyword
# arguments; nested values (`fresh`) merge per key across sources, the nearer source winning, as
# pydantic-settings merges every source.
SharedOptions: type[BaseSettings] = create_model(  # type: ignore[call-overload]
    "SharedOptions", __base__=_SharedBase,
    **{name: (info.annotation, info) for name, info in shared_options().items()})


def resolve(command: str, flags: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of `command`: its flag when given (not None), else FLEET_*, the project file, the default.

    `flags` are what argparse read; each is checked here, named by its flag. Raises `SettingsError`.
    """
    fields = options_for(command)
    given = {name: check(name, value, f"{flag_name(name)} {_shown(value)}")
             for name, value in flags.items() if name in fields and value is not None}
    token = _command.set(command)
    try:
        shared = SharedOptions(**{k: v for k, v in given.items() if cli_of(fields[k]).shared})
    finally:
        _command.reset(token)
    values = {name: getattr(shared, name) for name in fields if cli_of(fields[name]).shared}
    for name, info in fields.items():
        if not cli_of(info).shared:
            values[name] = given.get(name, info.get_default(call_default_factory=True))
    return values


def _shown(value: Any) -> str:
    if isinstance(value, float):  # argparse made "0" 0.0: say it as it was written
        return f"{value:g}"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)


# --- the process group and the tree --------------------------------------------------------------


class ProcessSettings(BaseSettings):
    """What this process reads from `FLEET_*` besides the options: read at each use, so a test may change it."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", env_ignore_empty=True)

    publish_seconds: Annotated[float, BeforeValidator(lambda v: number(v, least=0, example="120")), Field(
        description="during a run, publish into `--db` after a landing once the last publish is older than this "
                    "many seconds")] = DEFAULT_PUBLISH_SECONDS
    retry_window: Annotated[float | None, BeforeValidator(duration), Field(
        description="also the retry window of runs in this process: a worker process of `--workers` inherits "
                    "its run's (seconds, or with s, m, h or d; off: no bound)")] = DEFAULT_RETRY_WINDOW
    min_free_mb: Annotated[float, BeforeValidator(lambda v: number(v, least=0, example="64")), Field(
        description="megabytes a run keeps free on each disk it writes (working store, staging, lake): checked "
                    "before each chunk and before publishing; below it the run stops calling and ends failed "
                    "(exit code 6)")] = DEFAULT_MIN_FREE_MB
    reserve_mb: Annotated[float, BeforeValidator(lambda v: number(v, least=0, example="8")), Field(
        description="megabytes set aside beside the working store while a run runs, freed the moment a write "
                    "finds the disk full, so the answers already paid for still reach the disk")] = DEFAULT_RESERVE_MB
    prefect_server: Annotated[Literal["temporary", "shared"], Field(
        description="the Prefect server a command without PREFECT_API_URL uses: `shared`, one local server the "
                    "first command starts and the next ones reuse, stopped once no command has used it for "
                    "FLEET_PREFECT_IDLE_SECONDS; `temporary`, one of its own it starts and stops (3-10 s more per "
                    "command)")] = "shared"
    prefect_idle_seconds: Annotated[float, BeforeValidator(lambda v: number(v, least=0, example="600")), Field(
        description="how long the shared Prefect server (FLEET_PREFECT_SERVER) waits with no command "
                    "using it before it stops")] = DEFAULT_PREFECT_IDLE_SECONDS
    failpoint: Annotated[str, Field(description="crash tests only: NAME[:N] freezes the Nth pass of "
                                                "failpoint(NAME) (tasks/control/failpoints.py)")] = ""
    failpoint_marker: Annotated[str | None, Field(description="crash tests only: the file written when a "
                                                              "failpoint freezes")] = None


class DeadlineSettings(BaseSettings):
    """How long the waits at a run's edges may last (docs/stopping.md); `FLEET_*`, read at each use."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", env_ignore_empty=True)

    notify_attempt_seconds: Annotated[float, BeforeValidator(lambda v: number(v, above=0, example="15")), Field(
        description="`--notify`: one post attempt as a whole (connect, send, the answer's last byte)")] = 15.0
    notify_seconds: Annotated[float, BeforeValidator(lambda v: number(v, above=0, example="45")), Field(
        description="`--notify`: every attempt and the waits between them; the run then ends, reporting "
                    "the notification not sent")] = 45.0
    stop_seconds: Annotated[float, BeforeValidator(lambda v: number(v, least=0, example="3")), Field(
        description="after SIGTERM/SIGINT, how long the run waits for its chunks in flight to hand back their "
                    "counts; what is still out then is left pending (its answers land next run)")] = 3.0


def deadline_settings() -> DeadlineSettings:
    try:
        return DeadlineSettings()
    except ValidationError as exc:
        name = env_name(str(exc.errors()[0]["loc"][0]))
        raise SettingsError(f"{name}: {_reason(exc)}") from None


def process_settings() -> ProcessSettings:
    try:
        return ProcessSettings()
    except ValidationError as exc:
        name = env_name(str(exc.errors()[0]["loc"][0]))
        raise SettingsError(f"{name}: {_reason(exc)}") from None


def env_files() -> tuple[Path, ...]:
    """The `.env` files VDS_* are read from (after the environment), the later winning: the one beside the
    project file in use (`fleet.toml`, or `pyproject.toml` with `[tool.fleet]`), then the current folder's."""
    project = find_project_file()
    files = [project.parent / ".env"] if project else []
    here = Path(".env")
    if not files or files[0].resolve() != here.resolve():
        files.append(here)
    return tuple(f for f in files if f.is_file())


def service_settings() -> ServiceSettings:
    from fleet_data.connectors.config import ServiceSettings

    try:
        return ServiceSettings(_env_file=env_files() or None)
    except ValidationError as exc:
        raise SettingsError(ServiceSettings.describe(exc)) from None


def client_settings() -> Settings:
    """The client's settings (connectors' `Settings`): VDS_* from the environment, else the `.env` files
    (`env_files`). Raises ValueError naming a variable that cannot be used."""
    from fleet_data.connectors.config import Settings

    return Settings.from_env(env_file=env_files())


def service_in_use() -> str:
    """The service a command calls, as runs and answers record it: the embedded sandbox when nothing is
    configured (or when it is the one running), else the base URL without credentials (connectors/config.py)."""
    return client_settings().service


@dataclass(frozen=True)
class FleetSettings:
    """The tree: the service (VDS_*), the command's options (flags, FLEET_*, project file), the process (FLEET_*)."""

    service: ServiceSettings
    options: dict[str, Any]
    process: ProcessSettings
    deadlines: DeadlineSettings


def load_settings(command: str = "refresh", flags: Mapping[str, Any] | None = None) -> FleetSettings:
    """Everything a command reads, checked at once: a value that cannot work is refused before anything starts."""
    return FleetSettings(service=service_settings(), options=resolve(command, flags or {}),
                         process=process_settings(), deadlines=deadline_settings())


@contextlib.contextmanager
def exported(**values: str | None) -> Iterator[None]:
    """Set (None: unset) environment variables for the run's length, then restore them.

    Writing the environment is needed only where another reader cannot be handed a value: the key for
    the run's tasks (read where the call is made, never passed as a parameter), and what worker
    processes inherit (the retry window of `--workers`).
    """
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            _put(name, value)
        yield
    finally:
        for name, value in saved.items():
            _put(name, value)


def _put(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def option_argument(arguments: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """A flow's argument `name`, given itself or inside its `options` (decorators find `db` either way)."""
    if name in arguments:
        return arguments[name]
    return getattr(arguments.get("options"), name, default)


def default_text(default: Any) -> str:
    """A default as the help and the README show it: a list comma-separated, 180.0 as 180."""
    if isinstance(default, list):
        return ",".join(default)
    return f"{default:g}" if isinstance(default, float) else str(default)


def options_table(commands: Sequence[str] = COMMANDS) -> str:
    """The README's table of a run's options, from the model (tests/flows/test_options.py keeps them equal)."""
    rows = ["| Option (flow's `options`) | Flag | Environment / `fleet.toml` | Default | Commands | Meaning |",
            "|---|---|---|---|---|---|"]
    for name, info in RefreshOptions.model_fields.items():
        cli = cli_of(info)
        default = info.get_default(call_default_factory=True)
        written = str(default).lower() if isinstance(default, bool) else default_text(default)
        shown = "" if default in (None, {}) else f"`{written}`"
        flag = f"`{flag_name(name)}`" + (f" / `--no-{flag_name(name)[2:]}`" if default is True else "")
        shared = f"`{env_name(name)}` / `{name}`" if cli.shared else ""
        rows.append(f"| `{name}` | {flag} | {shared} | {shown} | "
                    f"{', '.join(c for c in commands if c in cli.commands)} | {info.description} |")
    return "\n".join(rows)


def environment_table() -> str:
    """The README's table of what the environment alone sets: the service (VDS_*) and the process (FLEET_*)."""
    from fleet_data.connectors.config import ServiceSettings

    rows = ["| Variable | Default | Meaning |", "|---|---|---|"]
    for prefix, model in (("VDS_", ServiceSettings), (ENV_PREFIX, ProcessSettings), (ENV_PREFIX, DeadlineSettings)):
        for name, info in model.model_fields.items():
            default = info.get_default(call_default_factory=True)
            shown = "" if default in (None, "") else f"`{default_text(default)}`"
            rows.append(f"| `{prefix}{name.upper()}` | {shown} | {info.description} |")
    return "\n".join(rows)
