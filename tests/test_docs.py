"""The docs site builds with `mkdocs build --strict`: a broken link or anchor, or a page left out of the nav, fails it.

mkdocs.yml's `validation` turns those into warnings and `--strict` into a failure. The site is built into a
temporary folder, never into the checkout. The built site is the manual: it names every command's every option,
every `FLEET_*` and `VDS_*` variable, every `fleet.toml` key and every exit code, listed here from the code
(the parser, the options' model, the settings' models, tasks/exitcodes.py), not from the pages. `make docs` builds
it in a venv of its own, from requirements-docs.lock alone.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about MkDocs 2, not a warning of ours


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("site") / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
                          cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return folder


def test_the_site_builds_strict(site):
    pages = [p.relative_to(ROOT / "docs").with_suffix("") for p in (ROOT / "docs").rglob("*.md")]
    assert all((site / ("" if str(name) == "index" else name) / "index.html").is_file() for name in pages)


def _text(site: Path) -> str:
    """Every page's words, as a reader sees them (tags dropped, entities read)."""
    pages = [html.unescape(re.sub(r"<[^>]+>", " ", p.read_text(encoding="utf-8"))) for p in site.rglob("index.html")]
    return " ".join(" ".join(pages).split())


def names_from_the_code() -> set[str]:
    """Every option, variable, `fleet.toml` key and exit code a user can meet, from the code that reads them, as the
    rendered pages read: a key beside its variable (`FLEET_DB / db`), a code beside its kind (`75 busy`)."""
    from fleet_data.connectors.config import ServiceSettings
    from fleet_data.flows.cli import build_parser
    from fleet_data.tasks.exitcodes import MEANINGS
    from fleet_data.tasks.settings import DeadlineSettings, ProcessSettings, RefreshOptions, cli_of, env_name, flag_name

    names = set()
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    for command, parser in sub.choices.items():
        names.add(f"fleet {command}")
        names |= {flag for action in parser._actions for flag in action.option_strings
                  if action.help != argparse.SUPPRESS and flag not in ("-h", "--help")}
    for name, info in RefreshOptions.model_fields.items():
        names.add(flag_name(name))
        if cli_of(info).shared:
            names |= {env_name(name), f"{env_name(name)} / {name}"}
    names |= {f"VDS_{name.upper()}" for name in ServiceSettings.model_fields}
    names |= {f"FLEET_{name.upper()}" for model in (ProcessSettings, DeadlineSettings) for name in model.model_fields}
    names |= {f" {code} {kind} " for code, kind, _ in MEANINGS}
    return names


def test_the_site_names_every_option_variable_key_and_exit_code(site):
    words = f" {_text(site)} "
    names = names_from_the_code()
    assert len(names) > 80 and "FLEET_CONCURRENCY" in names  # the list is the code's, not empty
    assert sorted(name for name in names if name not in words) == []


def test_a_broken_anchor_fails_the_build(tmp_path):
    # The check itself can fail (mkdocs.yml validation: anchors warn, and --strict): the same site with one link to
    # an anchor that does not exist.
    project = tmp_path / "project"
    shutil.copytree(ROOT / "docs", project / "docs")
    index = project / "docs" / "index.md"
    index.write_text(index.read_text() + "\n[gone](how-it-works.md#no-such-heading)\n")
    (project / "mkdocs.yml").write_text((ROOT / "mkdocs.yml").read_text())
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=project, env=ENV, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode != 0 and "no-such-heading" in done.stderr


def test_make_docs_builds_the_site_strict_in_a_small_venv_of_its_own(tmp_path):
    """What a docs writer runs: only mkdocs and its theme are installed (requirements-docs.lock), not fleet-data."""
    checkout = tmp_path / "checkout"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file() and not (ROOT / name).is_symlink():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    python = getattr(sys, "_base_executable", sys.executable)  # a plain interpreter, as a user's python3
    env = {k: v for k, v in ENV.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    done = subprocess.run(["make", "docs", f"PYTHON={python}"], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert (checkout / "site" / "reference" / "commands" / "index.html").is_file()
    venv = checkout / ".venv-docs"
    alone = subprocess.run([str(venv / "bin" / "python"), "-c", "import fleet_data"], capture_output=True, env=env,
                           timeout=60, check=False)
    assert alone.returncode != 0  # the site needs no fleet-data: the reference pages are committed
    installed = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink())
    assert installed < 200e6, installed  # mkdocs, its theme (icons: most of it) and 27 more (164 MB): not the project
