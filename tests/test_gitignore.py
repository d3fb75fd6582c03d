"""Every file a run leaves beside `--db` is ignored by git under data/ (`make demo` writes data/fleet.duckdb): the
files are the ones tasks/store/files.py and published.py name in their module docstrings, read from there."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMED = [ROOT / "tasks" / "store" / "files.py", ROOT / "tasks" / "store" / "published.py"]


def _files_beside_db() -> set[str]:
    found = set()
    for module in NAMED:
        found |= set(re.findall(r"^\s+<db>(\S*)\s", module.read_text(encoding="utf-8"), re.MULTILINE))
    return found


def test_every_file_beside_the_database_is_ignored_by_git():
    suffixes = _files_beside_db()
    assert {"", ".working", ".publishing", ".previous", ".published.json"} <= suffixes, suffixes
    paths = [f"data/fleet.duckdb{suffix}" for suffix in sorted(suffixes)]
    checked = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
    ignored = set(checked.stdout.split())
    assert ignored == set(paths), f"not ignored by .gitignore: {sorted(set(paths) - ignored)}"
