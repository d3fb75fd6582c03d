"""The package is one regular package, `fleet_data`, that the standard tools find by its name (pyproject.toml).

The folders stay at the repository's top (flows/, tasks/, connectors/, sql/); src/fleet_data/ holds the package's
__init__.py and py.typed and links to them, and the editable install puts src/ on the path. So Python, grimp (the
import-linter engine), coverage and mypy see the same modules, and nothing else of the checkout (tests/, build/).
Stock pyright is run by `make pyright` in CI (.ci/run): it takes minutes, so not here.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import fleet_data

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("connectors", "flows", "tasks")


def shipped_modules() -> set[str]:
    """Every module of the shipped code, named as installed: fleet_data.<folder>.<...>."""
    modules = {"fleet_data"}
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            if "node_modules" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules.add(".".join(["fleet_data", *parts]))
    return modules


def test_fleet_data_is_a_regular_package_with_its_types():
    assert fleet_data.__file__ == str(ROOT / "src" / "fleet_data" / "__init__.py")
    spec = importlib.util.find_spec("fleet_data")
    assert spec is not None and list(spec.submodule_search_locations or []) == [str(ROOT / "src" / "fleet_data")]
    assert (ROOT / "src" / "fleet_data" / "py.typed").is_file()
    for folder in (*FOLDERS, "sql"):  # the links, to the folders at the top
        assert (ROOT / "src" / "fleet_data" / folder).resolve() == ROOT / folder


def test_grimp_sees_the_package_and_nothing_else():
    import grimp

    graph = grimp.build_graph("fleet_data", cache_dir=None)
    assert set(graph.modules) == shipped_modules()
    assert graph.find_modules_directly_imported_by("fleet_data.flows.cli") >= {"fleet_data.flows.cli.parser"}


def test_coverage_lists_the_modules_a_run_never_imported(tmp_path):
    data = tmp_path / "coverage.data"
    run = [sys.executable, "-m", "coverage", "run", f"--data-file={data}", "-m", "fleet_data.flows.cli", "--version"]
    subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    report = tmp_path / "coverage.json"
    subprocess.run([sys.executable, "-m", "coverage", "json", f"--data-file={data}", "-o", str(report)], cwd=ROOT,
                   capture_output=True, text=True, timeout=300, check=True)
    files = json.loads(report.read_text())["files"]
    listed = {".".join(["fleet_data", *Path(name).with_suffix("").parts]).removesuffix(".__init__") for name in files}
    assert listed | {"fleet_data"} == shipped_modules()  # the one `fleet --version` never imported included
    assert files["flows/serve.py"]["summary"]["covered_lines"] == 0
    assert files["flows/cli/__init__.py"]["summary"]["covered_lines"] > 0


def test_mypy_reads_the_package_where_python_finds_it():
    import tomllib

    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["files"] == ["src/fleet_data"] and mypy["mypy_path"] == "src"
