"""`fleet completion SHELL`: shell completion for bash, zsh and fish, written from the parser itself.

The script is static: a Tab completes commands, options, choices (datasets, `--recall-details`, lookup's
endpoints) and file names in the shell alone, without starting Python. It is regenerated from the parser, so
a new option completes once the script is written again (`fleet completion bash --install` after an upgrade).
zsh runs the bash script through its `bashcompinit` layer.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

SHELLS = ("bash", "zsh", "fish")
PATHS = {"db", "lake", "vins_file", "out", "paths", "fleet_file", "csv_file", "vehicles"}  # values that are file names
# Where each shell loads a user's completion from (bash-completion's and fish's own folders; zsh: sourced from ~/.zshrc).
HOMES = {"bash": ".local/share/bash-completion/completions/fleet", "zsh": ".zsh/completions/fleet.zsh",
         "fish": ".config/fish/completions/fleet.fish"}
AFTER_INSTALL = {
    "bash": "new bash shells load it (with the bash-completion package); without it, add `source {path}` to ~/.bashrc",
    "zsh": "add `source {path}` to ~/.zshrc, then open a new shell",
    "fish": "new fish shells load it",
}


@dataclass
class Option:
    flags: list[str]
    takes_value: bool
    words: list[str] = field(default_factory=list)  # the values it takes, when it has a fixed set
    files: bool = False
    many: bool = False  # a comma-separated list of `words`
    help: str = ""


@dataclass
class Level:
    """A command (or a sub-command, as lookup's endpoints): its options, its sub-commands, what its arguments are."""

    options: list[Option] = field(default_factory=list)
    subcommands: dict[str, str] = field(default_factory=dict)  # name -> summary
    files: bool = False  # its positional arguments are file names
    words: list[str] = field(default_factory=list)  # or one of these


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("completion", help="print or install the shell completion script (bash, zsh, fish)")
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.add_argument("--install", action="store_true",
                   help="write it where the shell loads it, in your home folder (" +
                        ", ".join(f"{s}: ~/{h}" for s, h in HOMES.items()) + "), and say what else to do")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    script = script_for(args.shell)
    if not args.install:
        sys.stdout.write(script)
        return 0
    path = Path.home() / HOMES[args.shell]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script, encoding="utf-8")
    print(f"installed {path}: {AFTER_INSTALL[args.shell].format(path=path)}", file=sys.stderr)
    return 0


def script_for(shell: str) -> str:
    from .parser import build_parser

    tree = levels(build_parser())
    if shell == "fish":
        return fish(tree)
    text = bash(tree)
    return ("# fleet's completion for zsh, through bash's (`fleet completion zsh`)\n"
            "(( $+functions[compdef] )) || { autoload -U +X compinit && compinit; }\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + text) if shell == "zsh" else text


# --- the parser, read -------------------------------------------------------------------------------


def levels(parser: argparse.ArgumentParser) -> dict[str, Level]:
    """Every level of the command line by its path: "" (fleet), "refresh", "lookup", "lookup specs"..."""
    found: dict[str, Level] = {}

    def visit(path: str, current: argparse.ArgumentParser) -> None:
        level = found.setdefault(path, Level())
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                summaries = {a.dest: a.help or "" for a in action._choices_actions}
                for name, inner in action.choices.items():
                    level.subcommands[name] = summaries.get(name, "")
                    visit(f"{path} {name}".strip(), inner)
            elif action.option_strings and action.help != argparse.SUPPRESS:
                level.options.append(_option(action))
            elif not action.option_strings and action.dest in PATHS:
                level.files = True
            elif not action.option_strings and action.choices:
                level.words = [str(c) for c in action.choices]

    visit("", parser)
    sandbox = found.get("sandbox")
    if sandbox is not None:  # its options are the sandbox's own parser's
        from fleet_data.connectors.sandbox.__main__ import build_parser as sandbox_parser

        sandbox.options = [_option(a) for a in sandbox_parser()._actions if a.option_strings]
    return found


def _option(action: argparse.Action) -> Option:
    takes_value = action.nargs != 0
    words = [str(c) for c in action.choices] if action.choices else []
    many = False
    if action.dest == "datasets" and takes_value:
        from fleet_data.tasks.datasets import ALL_DATASETS

        words, many = list(ALL_DATASETS), True
    help_text = " ".join((action.help or "").split())
    return Option(list(action.option_strings), takes_value, words, action.dest in PATHS, many,
                  help_text if len(help_text) <= 70 else help_text[:69] + "…")


# --- bash (and zsh) -------------------------------------------------------------------------------


def bash(tree: dict[str, Level]) -> str:
    cases = "\n".join(_bash_case(path, level) for path, level in tree.items())
    return f"""# fleet's shell completion (`fleet completion bash`; written again after an upgrade: `fleet completion bash --install`)
_fleet() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} path="" word i
    # the command path: the words naming commands (lookup's endpoint too), options and their values skipped
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${{COMP_WORDS[i]}}
        [[ $word == -* ]] && continue
        case "$path" in
{_bash_levels(tree)}
        esac
    done
    case "$path" in
{cases}
    esac
}}
complete -o filenames -F _fleet fleet
"""


def _bash_levels(tree: dict[str, Level]) -> str:
    """Descend into a sub-command when the word names one of the current level's."""
    lines = []
    for path, level in tree.items():
        if level.subcommands:
            names = "|".join(sorted(level.subcommands))
            lines.append(f'            {_quote(path)}) case "$word" in {names}) path="${{path:+$path }}$word";; esac;;')
    return "\n".join(lines)


def _bash_case(path: str, level: Level) -> str:
    values = []
    for option in level.options:
        if not option.takes_value:
            continue
        flags = "|".join(option.flags)
        if option.many:
            values.append(f'{flags}) COMPREPLY=($(compgen -P "${{cur%${{cur##*,}}}}" -W "{" ".join(option.words)}" '
                          f'-- "${{cur##*,}}")); return;;')
        elif option.words:
            values.append(f'{flags}) COMPREPLY=($(compgen -W "{" ".join(option.words)}" -- "$cur")); return;;')
        elif option.files:
            values.append(f'{flags}) COMPREPLY=($(compgen -f -- "$cur")); return;;')
        else:
            values.append(f"{flags}) COMPREPLY=(); return;;")
    flags = " ".join(f for option in level.options for f in option.flags)
    words = " ".join([*level.subcommands, *level.words])
    rest = 'COMPREPLY=($(compgen -f -- "$cur"))' if level.files else f'COMPREPLY=($(compgen -W "{words}" -- "$cur"))'
    body = [f'case "$prev" in {" ".join(values)} esac' if values else ":",
            f'if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "{flags}" -- "$cur")); else {rest}; fi']
    return f"        {_quote(path)})\n            " + "\n            ".join(body) + "\n            ;;"


def _quote(path: str) -> str:
    return f'"{path}"'


# --- fish -------------------------------------------------------------------------------------------


def fish(tree: dict[str, Level]) -> str:
    lines = ["# fleet's shell completion (`fleet completion fish`; written again after an upgrade: "
             "`fleet completion fish --install`)", "complete -c fleet -f"]
    for path, level in tree.items():
        condition = _fish_condition(path, tree)
        for name, summary in level.subcommands.items():
            lines.append(f"complete -c fleet -n {shlex.quote(condition)} -a {shlex.quote(name)} -d {shlex.quote(summary)}")
        for option in level.options:
            lines.append(_fish_option(condition, option))
        if level.files:
            lines.append(f"complete -c fleet -n {shlex.quote(condition)} -F")
        if level.words:
            lines.append(f"complete -c fleet -n {shlex.quote(condition)} -a {shlex.quote(' '.join(level.words))}")
    return "\n".join(lines) + "\n"


def _fish_condition(path: str, tree: dict[str, Level]) -> str:
    """True at exactly this level: its commands typed, none of its sub-commands yet."""
    if not path:
        return "__fish_use_subcommand"
    words = path.split()
    parts = [f"__fish_seen_subcommand_from {w}" for w in words]
    below = tree[path].subcommands
    if below:
        parts.append(f"not __fish_seen_subcommand_from {' '.join(below)}")
    return "; and ".join(parts)


def _fish_option(condition: str, option: Option) -> str:
    flags = []
    for flag in option.flags:
        flags += ["-l", flag[2:]] if flag.startswith("--") else ["-s", flag[1:]]
    line = ["complete", "-c", "fleet", "-n", shlex.quote(condition), *flags]
    if option.takes_value:
        line += ["-r", "-F"] if option.files else ["-x"]
        if option.words:
            line += ["-a", shlex.quote(" ".join(option.words))]
    if option.help:
        line += ["-d", shlex.quote(option.help)]
    return " ".join(line)
