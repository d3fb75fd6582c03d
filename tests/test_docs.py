"""The docs site builds with `mkdocs build --strict`: a broken link or anchor, or a page left out of the nav, fails it.

mkdocs.yml's `validation` turns those into warnings and `--strict` into a failure. The site is built into a
temporary folder, never into the checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about MkDocs 2, not a warning of ours
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    pages = [p.stem for p in (ROOT / "docs").glob("*.md")]
    assert all((tmp_path / "site" / ("" if name == "index" else name) / "index.html").is_file() for name in pages)


def test_a_broken_anchor_fails_the_build(tmp_path):
    # The check itself can fail (mkdocs.yml validation: anchors warn, and --strict): the same site with one link to
    # an anchor that does not exist.
    site = tmp_path / "project"
    docs = site / "docs"
    docs.mkdir(parents=True)
    for page in (ROOT / "docs").iterdir():
        (docs / page.name).symlink_to(page)
    (docs / "index.md").unlink()
    (docs / "index.md").write_text((ROOT / "docs" / "index.md").read_text() + "\n[gone](how-it-works.md#no-such-heading)\n")
    (site / "mkdocs.yml").write_text((ROOT / "mkdocs.yml").read_text())
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=site, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True,
                          timeout=240, check=False)
    assert done.returncode != 0 and "no-such-heading" in done.stderr
