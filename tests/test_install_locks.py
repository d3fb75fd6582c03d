"""The Makefile installs each lockfile without resolving it again: pip 23 (the one `python3 -m venv` brings here), in
hash-checking mode, looks for the newest release of a dependency asked for with an extra (`prefect` needs
`httpx[http2]`) and refuses it as unpinned, even though the lock pins that package. When httpx 0.29 reached the
registry, `make install` failed on a fresh clone. The locks are complete (uv wrote every transitive pin), so
`--no-deps` installs exactly them; `pip check` after it says if a lock ever misses one.

The failure is played again on hand-made wheels in a folder: a lock of `alpha` (which needs `beta[x]`) and
`beta==1.0`, with `beta 2.0` also on offer, installed (dry run) with the Makefile's own flags."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = ROOT / "Makefile"


def _lock_installs() -> dict[str, list[str]]:
    """Each `pip install ... -r <lock>` line of the Makefile: the lock's name and the flags it is installed with."""
    found = {}
    for line in MAKEFILE.read_text(encoding="utf-8").splitlines():
        match = re.search(r"-m pip install (.*)-r (requirements[\w-]*\.lock)\s*$", line)
        if match:
            found[match.group(2)] = shlex.split(match.group(1))
    return found


def _wheel(folder: Path, name: str, version: str, metadata: str = "") -> str:
    """A minimal pure-Python wheel; its sha256."""
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": "",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{metadata}",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    path = folder / f"{name}-{version}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(path, "w") as wheel:
        for member, text in files.items():
            wheel.writestr(member, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            record.append(f"{member},sha256={digest},{len(text)}")
        wheel.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_makefile_installs_every_lock():
    assert set(_lock_installs()) == {"requirements.lock", "requirements-dev.lock", "requirements-docs.lock"}


@pytest.mark.parametrize("lock", ["requirements.lock", "requirements-dev.lock", "requirements-docs.lock"])
def test_a_lock_installs_as_pinned_when_a_newer_release_of_an_extra_exists(tmp_path, lock):
    flags = [flag for flag in _lock_installs()[lock] if flag != "--quiet"]
    alpha = _wheel(tmp_path, "alpha", "1.0", "Requires-Dist: beta[x]>=1\n")
    beta = _wheel(tmp_path, "beta", "1.0", "Provides-Extra: x\n")
    _wheel(tmp_path, "beta", "2.0", "Provides-Extra: x\n")
    pins = tmp_path / "pins.lock"
    pins.write_text(f"alpha==1.0 --hash=sha256:{alpha}\nbeta==1.0 --hash=sha256:{beta}\n")
    # Only this folder: none of the machine's pip configuration (indexes, find-links).
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env |= {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run([sys.executable, "-m", "pip", "install", *flags, "--dry-run", "--no-index",
                           "--find-links", str(tmp_path), "-r", str(pins)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Would install alpha-1.0 beta-1.0" in done.stdout, done.stdout


def test_every_lock_install_is_followed_by_pip_check():
    """`--no-deps` trusts the lock to be complete; `pip check` is what says so."""
    recipe_lines = MAKEFILE.read_text(encoding="utf-8").splitlines()
    for index, line in enumerate(recipe_lines):
        if re.search(r"-m pip install .*-r requirements[\w-]*\.lock", line):
            following = recipe_lines[index + 1:index + 4]
            assert any("-m pip check" in later for later in following), (line, following)
