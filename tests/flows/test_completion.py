"""`fleet completion SHELL` (flows/cli/completion.py): the scripts, loaded by the real shells, complete what the parser has.

bash runs the completion function as bash-completion would (COMP_WORDS, COMP_CWORD) and reads COMPREPLY; zsh
loads the same script through its `bashcompinit` layer and checks fleet is registered; fish is asked through
`complete -C`, as the shell asks on a Tab. zsh and fish are skipped where they are not installed, unless
FLEET_REQUIRE_SHELLS=1 (.ci/run installs them and sets it).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from fleet_data.flows.cli import main
from fleet_data.flows.cli.completion import HOMES, script_for
from fleet_data.tasks.datasets import ALL_DATASETS


@pytest.fixture(scope="module")
def scripts(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("completion")
    written = {}
    for shell in ("bash", "zsh", "fish"):
        path = folder / f"fleet.{shell}"
        path.write_text(script_for(shell))
        written[shell] = str(path)
    return written


def _shell(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        if os.environ.get("FLEET_REQUIRE_SHELLS") == "1":
            pytest.fail(f"{name} is not installed (FLEET_REQUIRE_SHELLS=1)")
        pytest.skip(f"{name} is not installed")
    return found


def bash_complete(script: str, line: str, cwd=None) -> list[str]:
    """What bash would offer on a Tab at the end of `line` (a trailing space: a new word)."""
    words = line.split(" ")
    program = (f"source {script}\n"
               f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; COMPREPLY=()\n"
               "_fleet; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    done = subprocess.run([_shell("bash"), "--norc", "-c", program], capture_output=True, text=True, timeout=60,
                          check=True, cwd=cwd)
    return [w for w in done.stdout.splitlines() if w]


def test_bash_completes_commands_options_choices_and_files(scripts, tmp_path):
    bash = scripts["bash"]
    assert bash_complete(bash, "fleet re") == ["refresh", "report"]
    assert bash_complete(bash, "fleet -v st") == ["status"]
    assert set(bash_complete(bash, "fleet refresh --da")) == {"--datasets", "--dask"}
    assert bash_complete(bash, "fleet refresh --datasets ") == list(ALL_DATASETS)
    assert bash_complete(bash, "fleet refresh --datasets specs,mar") == ["specs,market_value"]
    assert bash_complete(bash, "fleet refresh --recall-details ") == ["vin", "model"]
    assert bash_complete(bash, "fleet backfill --vi") == ["--vins", "--vins-file"]
    assert bash_complete(bash, "fleet lookup ob") == ["obd"]
    assert "--deepdata" in bash_complete(bash, "fleet lookup specs --")
    assert bash_complete(bash, "fleet completion ") == ["bash", "zsh", "fish"]
    assert "--fault-rate" in bash_complete(bash, "fleet sandbox --fa")
    (tmp_path / "fleet_a.csv").write_text("vin\n")
    (tmp_path / "fleet_b.parquet").write_text("")
    assert sorted(bash_complete(bash, "fleet refresh fleet_", cwd=tmp_path)) == ["fleet_a.csv", "fleet_b.parquet"]
    assert bash_complete(bash, "fleet refresh --db fleet_a", cwd=tmp_path) == ["fleet_a.csv"]
    assert bash_complete(bash, "fleet refresh --concurrency ", cwd=tmp_path) == []  # a number: nothing to offer


def test_bash_registers_the_function_for_fleet(scripts):
    done = subprocess.run([_shell("bash"), "--norc", "-c", f"source {scripts['bash']}; complete -p fleet"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "complete -o filenames -F _fleet fleet"


def test_zsh_loads_it_through_bashcompinit(scripts, tmp_path):
    zsh = _shell("zsh")
    program = (f"source {scripts['zsh']}\n"
               "print -r -- \"registered: ${_comps[fleet]}\"\n"
               # bashcompinit calls the function under `emulate sh` (arrays from 0), as here
               "t() { emulate -L sh; COMP_WORDS=(\"$@\"); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); COMPREPLY=(); _fleet;"
               " print -r -- \"${COMPREPLY[*]}\"; }\n"
               "t fleet refresh --recall-details ''\n"
               "t fleet completion ''\n")
    done = subprocess.run([zsh, "-f", "-c", program], capture_output=True, text=True, timeout=60, check=True,
                          env={**os.environ, "HOME": str(tmp_path), "ZDOTDIR": str(tmp_path)})
    lines = done.stdout.splitlines()
    assert lines[0] == "registered: _bash_complete -o filenames -F _fleet"
    assert lines[1:] == ["vin model", "bash zsh fish"]


def test_fish_completes_as_on_a_tab(scripts, tmp_path):
    fish = _shell("fish")

    def complete(line: str) -> list[str]:
        done = subprocess.run([fish, "--no-config", "-c", f"source {scripts['fish']}; complete -C '{line}'"],
                              capture_output=True, text=True, timeout=60, check=True,
                              env={**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)})
        return [row.split("\t")[0] for row in done.stdout.splitlines()]

    assert complete("fleet re") == ["refresh", "report"]
    assert set(complete("fleet refresh --recall-details ")) == {"vin", "model"}
    assert complete("fleet lookup ob") == ["obd"]
    assert {"--datasets", "--dask"} <= set(complete("fleet refresh --da"))
    assert "--install" in complete("fleet completion bash --")


def test_install_writes_where_the_shell_loads_it_and_says_what_else_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    for shell in ("bash", "zsh", "fish"):
        assert main(["completion", shell, "--install"]) == 0
        written = tmp_path / HOMES[shell]
        assert written.read_text() == script_for(shell)
        said = capsys.readouterr()
        assert said.err.startswith(f"installed {written}") and said.out == ""
        # fish loads it itself; bash does with the bash-completion package, else from ~/.bashrc; zsh from ~/.zshrc
        assert (f"add `source {written}`" in said.err) == (shell != "fish")
        assert ("bash-completion" in said.err) == (shell == "bash")


def test_without_install_it_prints_the_script(capsys):
    assert main(["completion", "fish"]) == 0
    assert capsys.readouterr().out == script_for("fish")
