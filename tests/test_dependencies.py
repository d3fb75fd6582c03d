"""The shipped code imports only what the wheel declares, and the wheel declares nothing it does not use.

deptry reads every import of flows/, tasks/ and connectors/ and compares it with pyproject.toml's
[project] dependencies (its settings are in [tool.deptry]): an import of an undeclared package (numpy once:
`fleet --version` failed in a user's fresh venv), of a package only the `dev` extra brings, or a declared
package nothing imports, fails here. The installed wheel itself is tried in tests/test_packaging.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("flows", "tasks", "connectors")


def _deptry(*roots: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    deptry = Path(sys.executable).with_name("deptry")
    assert deptry.exists(), f"{deptry} is missing: `make install` installs the dev dependencies"
    return subprocess.run([str(deptry), "--no-ansi", *roots], cwd=cwd, capture_output=True, text=True, timeout=300,
                          check=False)


def test_the_shipped_code_imports_exactly_its_declared_dependencies():
    done = _deptry(*SHIPPED)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No dependency issues found" in done.stdout + done.stderr


def test_an_undeclared_import_in_the_shipped_code_fails_the_check(tmp_path):
    """The check can fail: the same configuration over a module that imports what is not declared."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "tasks").mkdir()
    # yarl is installed only as aiohttp's dependency, as numpy was (pandas's) in the dev venv; yaml comes
    # only with the dev extra; numpy and polars are declared.
    (tmp_path / "tasks" / "ingest.py").write_text("import yarl\nimport yaml\nimport numpy\nimport polars\n")
    done = _deptry("tasks", "--ignore", "DEP002", cwd=tmp_path)  # in a one-module copy, most declared ones go unused
    report = done.stdout + done.stderr
    assert done.returncode != 0
    assert "DEP003 'yarl' imported but it is a transitive dependency" in report, report
    assert "DEP004 'yaml' imported but declared as a dev dependency" in report, report
    assert "'numpy'" not in report and "'polars'" not in report, report
