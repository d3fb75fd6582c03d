"""The commands' option flags, derived from the one model of a refresh's options (tasks/settings.py).

`add_flags` gives a command a flag for each option the model says it has; `apply` fills what the
command line left unset: flag > environment (`FLEET_*`) > project file (`fleet.toml` or
`[tool.fleet]`) > built-in default, each value checked by the model's grammar and, when refused,
named by where it came from (the flag, the variable, or the file and its key). The project file
holds what a team shares, never a secret; unknown entries are refused with a "did you mean".

Prefect is not imported here: `fleet status` and dry runs must stay fast and free of it.
"""

from __future__ import annotations

import argparse
from typing import Any, Literal, Union, get_args, get_origin

from fleet_data.tasks.settings import (
    ENV_PREFIX,
    FILE_NAME,
    SettingsError,
    cli_of,
    default_text,
    flag_name,
    fresh_windows,
    load_project_file,
    options_for,
    resolve,
)

from fleet_data.tasks.exitcodes import USAGE

__all__ = ["ConfigError", "ENV_PREFIX", "FILE_NAME", "add_flags", "apply", "check_freshness", "load_project_file"]


class ConfigError(SettingsError):
    """A setting that cannot be used; one line naming where it came from. Exit code 2."""

    code = USAGE


def add_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """A flag per option of `command`, from the model: its name, type or choices, help and default.

    Every flag defaults to None (unset), so `apply` can tell a flag given from one left to the
    environment, the project file or the model's default.
    """
    for name, info in options_for(command).items():
        cli, kind = cli_of(info), _plain(info.annotation)
        default = info.get_default(call_default_factory=True)
        text = info.description or ""
        if name == "datasets":
            from fleet_data.tasks.datasets import ALL_DATASETS

            text += f"; from: {', '.join(ALL_DATASETS)}"
        if default not in (None, {}, "") and not isinstance(default, bool):
            text += f" (default {default_text(default)})"
        if cli.shared:  # where a team sets it instead (`fleet --help` and docs/reference/options.md say so)
            text += f" [{ENV_PREFIX}{name.upper()}, fleet.toml {name}]"
        common: dict[str, Any] = {"dest": name, "default": None, "help": text.replace("%", "%%")}
        if kind is bool:
            parser.add_argument(flag_name(name), action="store_const", const=True, **common)
            if default is True:  # on by default: the flag that turns it off
                parser.add_argument("--no-" + flag_name(name)[2:], dest=name, action="store_const", const=False,
                                    help=f"the opposite of {flag_name(name)}")
        elif get_origin(kind) is dict:
            parser.add_argument(flag_name(name), action="append", metavar=cli.metavar, **common)
        elif get_origin(kind) is Literal:
            parser.add_argument(flag_name(name), choices=get_args(kind), **common)
        else:
            typed = kind if kind in (int, float) and not cli.grammar else str
            metavar = cli.metavar or ("PATH" if cli.path else "N" if kind is int else None)
            parser.add_argument(flag_name(name), type=typed, metavar=metavar, **common)


def _plain(annotation: Any) -> Any:
    """`int | None` -> int: the type a flag's text becomes."""
    if get_origin(annotation) in (Union, type(int | None)):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        return inner[0] if len(inner) == 1 else str
    return annotation


def apply(args: argparse.Namespace, command: str) -> None:
    """Fill every option of `command` the command line left unset (None); check every one. Raises ConfigError."""
    flags = {name: getattr(args, name) for name in options_for(command) if hasattr(args, name)}
    try:
        values = resolve(command, flags)
    except SettingsError as exc:
        raise ConfigError(str(exc)) from None
    for name, value in values.items():
        if hasattr(args, name):
            setattr(args, name, value)


def check_freshness(windows: dict[str, str], where: str) -> None:
    """Freshness windows, checked with the plan's own grammar; a ConfigError naming `where`."""
    try:
        fresh_windows(windows)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
