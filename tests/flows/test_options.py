"""A run's options are declared once (tasks/settings.py `RefreshOptions`): the flags, the `FLEET_*` names, the
`fleet.toml` keys, the flow's parameters, the deployments' parameters and the reference page's table all equal the model.

Each test reads the real thing (the argparse parser `fleet` builds, the environment and project file `fleet`
reads, the Prefect flow's signature and parameter schema, prefect.yaml, docs/reference/) and compares it to the model.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
from pathlib import Path

import pytest
import yaml

from fleet_data.flows.cli import build_parser, parse
from fleet_data.tasks.settings import (
    COMMANDS,
    BackfillOptions,
    RefreshOptions,
    RunOptions,
    env_name,
    environment_table,
    flag_name,
    options_for,
    options_table,
    shared_options,
)

ROOT = Path(__file__).resolve().parents[2]
# A value other than the default for each option a team may share, as the environment writes it and as the
# project file does, and what the model reads from both. A new shared option must be added here.
SAMPLES = {
    "db": ("team.duckdb", "team.duckdb", "team.duckdb"),
    "lake": ("exports", "exports", "exports"),
    "datasets": ("specs,recalls", ["specs", "recalls"], ["specs", "recalls"]),
    "fresh": ("recalls=2d", {"recalls": "2d"}, {"recalls": "2d"}),
    "concurrency": ("3", 3, 3),
    "chunk_size": ("40", 40, 40),
    "batch_size": ("700", 700, 700),
    "recall_details": ("model", "model", "model"),
    "plates": ("false", False, False),
    "retry_window": ("2m", "2m", 120.0),
    "allow_clock_behind": ("yes", True, True),
}


@pytest.fixture(autouse=True)
def clean(monkeypatch, tmp_path):
    for name in [n for n in os.environ if n.startswith(("FLEET_", "VDS_"))]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices[command]


# Flags of the same name that mean something else there: the datasets a backfill fetches again (default: those
# with failures), the datasets of `fleet serve`'s monthly deployment.
OWN_MEANING = {("backfill", "datasets"), ("serve", "datasets")}


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_a_flag_for_exactly_its_options(command):
    actions = [a for a in _subparser(command)._actions
               if a.dest in RefreshOptions.model_fields and (command, a.dest) not in OWN_MEANING]
    model = options_for(command)
    assert {a.dest for a in actions} == set(model)  # no option missing, none added by hand beside the model
    if command == "refresh":  # every flag of a refresh is an option, but its files and how it reports
        rest = {a.dest for a in _subparser(command)._actions} - set(model)
        assert rest == {"help", "paths", "json", "wait", "verbose"}
    for action in actions:
        assert flag_name(action.dest) in action.option_strings or action.option_strings == ["--no-" + action.dest]
        assert action.default is None  # unset: the environment, the file or the model's default fills it
    for name, info in model.items():
        (flag,) = [a for a in actions if flag_name(name) in a.option_strings]
        assert (info.description or "").replace("%", "%%") in flag.help


def test_every_shared_option_is_read_from_its_variable_and_its_file_key(clean):
    assert set(SAMPLES) == set(shared_options())
    defaults = parse(["refresh", "fleet.csv"])
    for name, (env_text, _, expected) in SAMPLES.items():
        assert getattr(defaults, name) != expected, name
        os.environ[env_name(name)] = env_text
        try:
            assert getattr(parse(["refresh", "fleet.csv"]), name) == expected, env_name(name)
        finally:
            del os.environ[env_name(name)]
    (clean / "fleet.toml").write_text("\n".join(_toml(name, value) for name, (_, value, _) in SAMPLES.items()))
    from_file = parse(["refresh", "fleet.csv"])
    assert {name: getattr(from_file, name) for name in SAMPLES} == {name: e for name, (_, _, e) in SAMPLES.items()}


def _toml(key: str, value: object) -> str:
    if isinstance(value, dict):
        return f"{key} = {{ " + ", ".join(f'{k} = "{v}"' for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return f"{key} = {str(value).lower()}"
    if isinstance(value, list):
        return f"{key} = [" + ", ".join(f'"{v}"' for v in value) + "]"
    return f'{key} = "{value}"' if isinstance(value, str) else f"{key} = {value}"


def test_only_the_model_s_shared_options_are_file_keys(clean, capsys):
    from fleet_data.flows.cli import main

    for name in set(RefreshOptions.model_fields) - set(shared_options()):
        (clean / "fleet.toml").write_text(f"{name} = 1\n")
        assert main(["refresh", "fleet.csv"]) == 2
        assert "unknown setting" in capsys.readouterr().err


def test_the_committed_fleet_toml_shows_every_shared_option():
    top = (ROOT / "fleet.toml").read_text().split("# [fresh]")[0]
    lines = [re.match(r"# (\w+) = ", line) for line in top.splitlines()]
    assert {m.group(1) for m in lines if m} | {"fresh"} == set(shared_options())


def test_the_flow_takes_paths_and_the_model():
    from fleet_data.flows.backfill import backfill_fleet
    from fleet_data.flows.refresh import refresh_fleet

    assert list(inspect.signature(refresh_fleet.fn).parameters) == ["paths", "options", "run_id"]
    schema = refresh_fleet.parameters  # what Prefect validates a deployment's parameters with, and shows
    assert list(schema.properties) == ["paths", "options", "run_id"]
    assert schema.definitions["RefreshOptions"]["properties"].keys() == RefreshOptions.model_fields.keys()
    assert list(inspect.signature(backfill_fleet.fn).parameters) == ["options", "run_id"]
    assert backfill_fleet.parameters.definitions["BackfillOptions"]["properties"].keys() == BackfillOptions.model_fields.keys()
    assert set(RunOptions.model_fields) <= set(BackfillOptions.model_fields) & set(RefreshOptions.model_fields)


def test_prefect_yaml_gives_the_flow_its_options():
    for deployment in yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]:
        parameters = deployment["parameters"]
        assert set(parameters) <= {"paths", "options", "run_id"}
        assert set(parameters["options"]) <= set(RefreshOptions.model_fields)
        RefreshOptions.model_validate(parameters["options"])


def test_the_reference_tables_are_the_model_s():
    page = (ROOT / "docs" / "reference" / "configuration.md").read_text()  # written by `make reference`
    for name, table in (("options", options_table()), ("environment", environment_table())):
        written = re.search(rf"<!-- {name}:start[^>]*-->\n(.*?)\n<!-- {name}:end -->", page, re.S)
        assert written and written.group(1) == table, f"regenerate the {name} table from tasks/settings.py: make reference"


def test_the_settings_tree_reads_every_group_at_once(clean, monkeypatch):
    from fleet_data.tasks.settings import SettingsError, load_settings

    (clean / "fleet.toml").write_text("chunk_size = 40\n")
    monkeypatch.setenv("VDS_TIMEOUT", "2.5")
    monkeypatch.setenv("FLEET_PUBLISH_SECONDS", "7")
    monkeypatch.setenv("FLEET_CONCURRENCY", "3")
    tree = load_settings("refresh", {"concurrency": 5})
    assert (tree.service.timeout, tree.process.publish_seconds) == (2.5, 7.0)
    assert (tree.options["chunk_size"], tree.options["concurrency"]) == (40, 5)  # the flag beats FLEET_CONCURRENCY
    monkeypatch.setenv("FLEET_PUBLISH_SECONDS", "inf")
    with pytest.raises(SettingsError, match="FLEET_PUBLISH_SECONDS"):
        load_settings("refresh")


# Where the environment is still touched outside tasks/settings.py, and why: each copies it whole for a child
# process (which must inherit the key, PYTHONPATH and Prefect's settings; the shared Prefect server, which outlives
# its command, all of it but the secrets), or writes what Prefect reads from it.
CHILD_ENVIRONMENTS = {"flows/processes.py", "flows/shared_prefect.py", "connectors/sandbox/runner.py"}


def test_no_module_reads_the_environment_by_itself():
    import ast

    readers = []
    for path in sorted([*ROOT.glob("tasks/**/*.py"), *ROOT.glob("flows/**/*.py"), *ROOT.glob("connectors/**/*.py")]):
        relative = str(path.relative_to(ROOT))
        if relative == "tasks/settings.py" or "node_modules" in relative:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            environ = isinstance(node, ast.Attribute) and node.attr == "environ"
            getenv = isinstance(node, ast.Attribute) and node.attr == "getenv"
            if getenv or environ and relative not in CHILD_ENVIRONMENTS:
                readers.append(f"{relative}:{node.lineno}")
    # os.environ.setdefault / [...] = for Prefect and the libraries of the processes a run starts: checked below
    writes = {"flows/cli/__init__.py", "flows/serve.py", "tasks/control/memory.py"}
    unexpected = [r for r in readers if r.split(":")[0] not in writes]
    assert not unexpected, f"read settings through tasks/settings.py, not os.environ: {unexpected}"
    for relative in writes:
        text = (ROOT / relative).read_text(encoding="utf-8")
        assert not re.search(r"os\.environ\.get\(|os\.environ\[[^\]]+\](?!\s*=)|in os\.environ", text), relative
