"""Shared defaults for `fleet` commands: flag > environment (`FLEET_*`) > project file > built-in default.

The project file is the nearest `fleet.toml`, or `pyproject.toml` with a `[tool.fleet]` table, in the
current folder or one of its parents (in each folder `fleet.toml` is looked at first). It holds what a
team shares (database, lake, datasets, freshness, concurrency...), never a secret: the key lives in
the environment or `.env`, and a key-like entry in the file is refused. So is an unknown entry, named
with its file, so a typo does not silently fall back to a default. Relative paths in the file are
relative to the file's folder, so every subfolder of the project uses the same database.

Only the standard library is imported here: `fleet status` must stay fast and free of Prefect.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.plan.due import ALL_DATASETS, DEFAULT_DATASETS
from tasks.recalls.batches import MAX_BATCH_VINS

from .defaults import DEFAULT_DB, DEFAULT_LAKE
from .exitcodes import USAGE

FILE_NAME = "fleet.toml"
ENV_PREFIX = "FLEET_"
SECRET_WORDS = ("key", "secret", "token", "password")


class ConfigError(Exception):
    """A setting that cannot be used; one line naming where it came from. Exit code 2."""

    code = USAGE


def _positive(text: Any, where: str) -> int:
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise ConfigError(f"{where}: {text!r} is not a whole number; write e.g. 8")
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{where}: {text!r} is not a whole number; write e.g. 8") from None
    if value < 1:
        raise ConfigError(f"{where}: {value} must be 1 or more")
    return value


_UNITS = {"s": 1, "m": 60, "h": 3600}


def _duration(value: Any, where: str) -> float:
    """Seconds (a number, or one with s, m or h, e.g. "90s", "3m"); "off" is no bound (infinity)."""
    text = str(value).strip().lower() if isinstance(value, (int, float, str)) and not isinstance(value, bool) else ""
    if text == "off":
        return float("inf")
    number, unit = (text[:-1], _UNITS[text[-1]]) if text[-1:] in _UNITS else (text, 1)
    try:
        seconds = float(number) * unit
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise ConfigError(f"{where}: {value!r} is not a duration; write seconds or a number with s, m or h "
                          "(e.g. 3m), or off")
    return seconds


def _datasets(value: Any, where: str) -> str:
    names = [d.strip() for d in value.split(",")] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(d, str) for d in names):
        raise ConfigError(f"{where}: a list of datasets, e.g. [\"specs\", \"recalls\"]")
    unknown = [d for d in names if d and d not in ALL_DATASETS]
    if unknown:
        raise ConfigError(f"{where}: unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(ALL_DATASETS)}")
    return ",".join(d for d in names if d)


def _fresh(value: Any, where: str) -> dict[str, str]:
    """A table `{dataset = "14d"}` (file) or `dataset=14d,...` (environment); checked with the plan's own grammar."""
    if isinstance(value, str):
        items = [i.strip() for i in value.split(",") if i.strip()]
        if not all("=" in i for i in items):
            raise ConfigError(f"{where}: write DATASET=AGE,..., e.g. market_value=14d,no_data=3d")
        value = dict(i.split("=", 1) for i in items)
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{where}: a table of dataset = \"AGE\", e.g. [fresh] market_value = \"14d\"")
    check_freshness(value, where)
    return {str(k): v for k, v in value.items()}


def check_freshness(windows: dict[str, str], where: str) -> None:
    from tasks.plan.due import (
        parse_freshness,  # the one grammar: what the plan itself accepts
    )

    try:
        parse_freshness(windows)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _choice(*choices: str) -> Callable[[Any, str], str]:
    def check(value: Any, where: str) -> str:
        if value not in choices:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(choices)}")
        return str(value)

    return check


def _switch(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    words = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
    if isinstance(value, str) and value.strip().lower() in words and where.startswith(ENV_PREFIX):
        return words[value.strip().lower()]
    raise ConfigError(f"{where}: {value!r} is not true or false" + ("" if where.startswith(ENV_PREFIX) else
                                                                     " (write it without quotes)"))


def _path(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {value!r} is not a path; write it in quotes")
    return value


@dataclass(frozen=True)
class Option:
    parse: Callable[[Any, str], Any]
    default: Any
    commands: tuple[str, ...]
    is_path: bool = False
    parse_flag: bool = False  # the flag's text is parsed like the file's and the environment's


# Each entry: the argparse destination it fills, for the commands that have that flag.
OPTIONS = {
    "db": Option(_path, DEFAULT_DB, ("refresh", "backfill", "status", "serve"), is_path=True),
    "lake": Option(_path, DEFAULT_LAKE, ("refresh", "backfill", "serve"), is_path=True),
    "datasets": Option(_datasets, ",".join(DEFAULT_DATASETS), ("refresh",)),
    "fresh": Option(_fresh, {}, ("refresh",)),
    "concurrency": Option(_positive, 32, ("refresh", "backfill")),
    "chunk_size": Option(_positive, 500, ("refresh", "backfill")),
    "batch_size": Option(_positive, MAX_BATCH_VINS, ("refresh",)),
    "recall_details": Option(_choice("vin", "model"), "vin", ("refresh",)),
    "plates": Option(_switch, True, ("refresh",)),
    # Once a run has made every first call it can, its retries get this long more (tasks/control/retry_window.py).
    "retry_window": Option(_duration, 180.0, ("refresh",), parse_flag=True),
}


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
        if pyproject.is_file() and "tool" in _read(pyproject) and "fleet" in _read(pyproject)["tool"]:
            return pyproject
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: unreadable ({exc.strerror or exc})") from None


def load_project_file(start: Path | None = None) -> ProjectFile:
    path = find_project_file(start)
    if path is None:
        return ProjectFile()
    table = _read(path)
    if path.name == "pyproject.toml":
        table = table["tool"]["fleet"]
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [tool.fleet] must be a table")
    project = ProjectFile(path)
    for raw_key, value in table.items():
        key = raw_key.replace("-", "_")
        where = project.where(raw_key)
        if key not in OPTIONS:
            if any(word in key.lower() for word in SECRET_WORDS):
                raise ConfigError(f"{where}: secrets do not belong in the project file (it is shared, committed); "
                                  "set VDS_API_KEY in the environment or in .env, and remove it from the file")
            close = difflib.get_close_matches(key, OPTIONS, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ConfigError(f"{where}: unknown setting; {hint}known: {', '.join(OPTIONS)}")
        parsed = OPTIONS[key].parse(value, where)
        if OPTIONS[key].is_path and parsed and not Path(parsed).is_absolute():
            parsed = _beside(path, parsed)
        project.values[key] = parsed
    return project


def _beside(project_file: Path, relative: str) -> str:
    """A path written in the file, relative to the file's folder (kept as written when that is here)."""
    folder = project_file.parent
    if folder == Path.cwd().resolve():
        return relative
    return str(folder / relative)


def apply(args: Any, command: str, project: ProjectFile | None = None) -> None:
    """Fill every option the command line left unset (None): environment, then project file, then default."""
    project = project if project is not None else load_project_file()
    for key, option in OPTIONS.items():
        if command not in option.commands or not hasattr(args, key):
            continue
        env_name = ENV_PREFIX + key.upper()
        given = getattr(args, key)
        if key == "fresh":  # per dataset: each window from the nearest source that sets it
            merged = {**option.default, **project.values.get(key, {})}
            if os.environ.get(env_name):
                merged.update(option.parse(os.environ[env_name], env_name))
            merged.update(given or {})
            setattr(args, key, merged)
            continue
        if given is not None:
            if option.parse_flag:
                setattr(args, key, option.parse(given, "--" + key.replace("_", "-")))
            continue
        if os.environ.get(env_name):
            value = option.parse(os.environ[env_name], env_name)
        elif key in project.values:
            value = project.values[key]
        else:
            value = option.default
        setattr(args, key, value)
