"""`fleet --help` and `fleet COMMAND --help` (flows/cli/parser.py, flows/cli/helptext.py) and the reference pages written
from them (flows/cli/reference.py).

`fleet --help` lists the commands without building them (no model, polars, DuckDB, httpx or Prefect imported); a
command's help puts its options in groups, names the `FLEET_*` variable and `fleet.toml` key of each one a team may
set, and shows examples that parse; the reference pages and `.env.example` are what the code writes.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fleet_data.tasks.exitcodes import KINDS
from fleet_data.flows.cli import build_parser, main, parse
from fleet_data.flows.cli import helptext, parser as cli_parser, reference
from fleet_data.tasks.exitcodes import MEANINGS
from fleet_data.tasks.settings import RefreshOptions, cli_of, env_name, flag_name, options_for

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("polars", "duckdb", "httpx", "pyarrow", "prefect", "pydantic", "fleet_data.tasks.settings", "fleet_data.connectors")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _help_of(command: str, capsys) -> str:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_fleet_help_lists_every_command_without_importing_them():
    probe = ("import sys, io, contextlib\n"
             "from fleet_data.flows.cli import main\n"
             "out = io.StringIO()\n"
             "with contextlib.redirect_stdout(out):\n"
             "    try:\n        main(['--help'])\n    except SystemExit as exc:\n        code = exc.code\n"
             f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
             "print(__import__('json').dumps({'code': code, 'help': out.getvalue(), 'heavy': heavy}))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    seen = json.loads(done.stdout)
    assert seen["code"] == 0 and seen["heavy"] == []
    for command in cli_parser.COMMANDS:
        assert f"    {command.name}" in seen["help"]
    for code, kind, _ in MEANINGS:  # the exit codes, too
        assert f"{code:>3}  {kind}" in seen["help"]


def test_each_command_says_the_summary_fleet_help_shows():
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    built = {action.dest: action.help for action in sub._choices_actions}
    assert built == {command.name: command.summary for command in cli_parser.COMMANDS}


def test_only_the_command_asked_for_is_built():
    lazy = _subparsers(build_parser("status"))
    assert {a.dest for a in lazy["status"]._actions} >= {"db", "runs", "json"}
    assert [a.dest for a in lazy["refresh"]._actions] == []  # a name and a summary only


def test_refresh_help_groups_its_options_and_names_their_variables_and_keys(capsys):
    text = _help_of("refresh", capsys)
    headings = [line[:-1] for line in text.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert headings[:6] == ["positional arguments", "what to fetch", "cost", "concurrency", "output",
                            "recall batch notifications"]
    flat = " ".join(text.split())
    for name, info in options_for("refresh").items():
        assert flag_name(name) in flat
        if cli_of(info).shared:
            assert f"[{env_name(name)}, fleet.toml {name}]" in flat, name
    assert "examples: fleet refresh data/sample_fleet.csv --dry-run" in flat


@pytest.mark.parametrize("command", ["refresh", "backfill", "status", "report", "serve"])
def test_every_option_is_in_a_group(command):
    parser = _subparsers(build_parser())[command]
    ungrouped = [a.option_strings[0] for a in parser._optionals._group_actions
                 if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]
    assert ungrouped == []


def test_every_model_option_has_its_group_declared():
    assert set(RefreshOptions.model_fields) <= set(helptext.GROUPS)


def test_every_command_has_examples_and_every_example_parses(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no fleet.toml around; parsing reads no file the examples name
    for variable in [v for v in os.environ if v.startswith(("FLEET_", "VDS_"))]:
        monkeypatch.delenv(variable)
    assert set(helptext.EXAMPLES) == {command.name for command in cli_parser.COMMANDS}
    for command, examples in helptext.EXAMPLES.items():
        assert examples, command
        for example in examples:
            words = shlex.split(example.command)
            if command == "sandbox":  # its options are the sandbox's own parser's
                from fleet_data.connectors.sandbox.__main__ import build_parser as sandbox_parser

                sandbox_parser().parse_args(words[1:])
            else:
                assert parse(words).command == command, example


def test_a_wrong_example_would_not_parse(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        parse(shlex.split("refresh data/sample_fleet.csv --max-unit 5000 --no-such-option"))


def test_the_reference_pages_are_what_the_code_writes():
    stale = [path for path, text in reference.pages().items() if (ROOT / path).read_text(encoding="utf-8") != text]
    assert stale == [], f"run `make reference` to write {', '.join(stale)} again"


def test_the_commands_page_names_every_option_of_every_command():
    page = (ROOT / "docs" / "reference" / "commands.md").read_text(encoding="utf-8")
    for name, command in _subparsers(build_parser()).items():
        assert f"## fleet {name}" in page
        for action in command._actions:
            for flag in action.option_strings:
                if action.help != argparse.SUPPRESS and flag not in ("-h", "--help"):
                    assert f"`{flag}" in page, (name, flag)


def test_the_exit_code_kinds_are_the_json_errors_kinds():
    assert {code: kind for code, kind, _ in MEANINGS if code in KINDS} == KINDS
    assert {code for code, _, _ in MEANINGS} >= set(KINDS)


def test_env_example_holds_every_service_variable_and_loads_as_unset(tmp_path, monkeypatch):
    from fleet_data.connectors.config import ServiceSettings

    text = (ROOT / ".env.example").read_text(encoding="utf-8")
    for name in ServiceSettings.model_fields:
        assert f"VDS_{name.upper()}=" in text
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(text)
    for name in ServiceSettings.model_fields:
        monkeypatch.delenv(f"VDS_{name.upper()}", raising=False)
    assert ServiceSettings().model_dump() == {name: None for name in ServiceSettings.model_fields}


@pytest.mark.parametrize("command", [c.name for c in cli_parser.COMMANDS])
def test_every_command_s_help_ends_with_its_examples(command, capsys):
    text = " ".join(_help_of(command, capsys).split())
    assert "examples:" in text
    for example in helptext.EXAMPLES[command]:
        assert f"fleet {example.command}" in text
