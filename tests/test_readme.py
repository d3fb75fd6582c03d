"""The README's ways to query the database work as written, on a machine with only what the project installs.

A demo-like database (the published file, written by the pipeline's own store and publish) in a
folder's `data/`; then the README's Python one-liner and Python block run there as they are printed,
and its example queries run on a read-only connection. A command the README gives for a program the
project does not install (the DuckDB CLI) would fail for a new user: none is allowed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.store.published import publish_file as publish

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
VINS = ["1HGCM82633A004352", "WBA3A5C56G0915102"]


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.S | re.M)


@pytest.fixture
def demo(tmp_path) -> Path:
    """A folder whose data/fleet.duckdb is a published database holding two vehicles."""
    db = tmp_path / "data" / "fleet.duckdb"
    with open_database(db) as store:
        store.start_run("refresh", ["fleet.csv"], {}, run_id="r1")
        store.land("vehicles", pl.DataFrame({"vin": VINS, "unit_number": ["U-1", "U-2"]}), "r1")
    publish(db)
    return tmp_path


def _python(code: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_quick_start_one_liner_counts_the_vehicles(demo):
    (code,) = re.findall(r'`\.venv/bin/python -c "(.*?)"`', README)
    assert "read_only=True" in code
    out = _python(code, demo)
    assert re.search(r"│\s+2\s+│", out), out  # the count, printed by .show()


def test_the_analysts_python_block_queries_the_file_it_opened(demo):
    blocks = [b for b in _blocks("python") if "duckdb.connect" in b and "ATTACH" not in b]
    assert blocks
    for code in blocks:
        assert "read_only=True" in code
        out = _python(code, demo)
        assert "vehicles" in out and re.search(r"│\s+2\s+│", out), out  # printed, from the file's tables


def test_the_own_tables_block_keeps_the_analysts_table_in_their_own_file(demo):
    (code,) = [b for b in _blocks("python") if "ATTACH" in b]
    assert "(READ_ONLY)" in code  # ours attached read-only; the read-write file is theirs
    out = _python(code, demo)
    assert "vehicles" in out, out
    data = demo / "data"
    with duckdb.connect(str(data / "my_analysis.duckdb"), read_only=True) as con:
        assert con.sql("SELECT table_name FROM duckdb_tables()").fetchall() == [("my_watch_list",)]
    said: list[str] = []
    assert publish(data / "fleet.duckdb", say=said.append) is not None
    assert said == [] and not list(data.glob("*.changed-*"))  # ours was not written to: replaced quietly


def test_the_example_queries_run_read_only(demo):
    statements = re.split(r";\s*\n", _blocks("sql")[0])
    queries = [q for q in statements if any(line.strip() and not line.strip().startswith("--") for line in q.splitlines())]
    assert len(queries) >= 3
    with duckdb.connect(str(demo / "data" / "fleet.duckdb"), read_only=True) as con:
        for query in queries:
            con.sql(query).fetchall()


def test_no_command_needs_a_program_the_project_does_not_install():
    commands = [line.strip() for block in _blocks("sh") for line in block.splitlines()]
    for program in ("duckdb",):
        uses = [c for c in commands if c.split(" ", 1)[0] == program]
        assert not uses or shutil.which(program), f"the README runs {program}, which nothing installs: {uses}"
