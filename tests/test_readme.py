"""Every command the README and the docs show runs as written, against the sandbox, on a machine with only what the project installs.

THE CONVENTION, for README.md and docs/*.md (docs/data-dictionary.md is generated and shows no commands):

- A ```bash block is run. It is one `bash -e -o pipefail` script (a failing line fails it), run in a copy
  of the checkout (its tracked files, and the virtualenv linked in as `.venv`) with the venv's `bin` first on
  PATH, as after `source .venv/bin/activate`. Blocks run in order: the README's first (its first block is
  `make demo`, which builds `data/fleet.duckdb`), then the pages in mkdocs.yml's nav order, all in the same
  folder, so a page may use what `make demo` left. Each block must exit 0 within BLOCK_TIMEOUT seconds.
- The service is one standing `fleet sandbox` for all of them (VDS_BASE_URL, and VDS_API_KEY=sandbox_demo_key:
  the standard plan the embedded sandbox gives a command run with nothing set), and Prefect one server
  (PREFECT_API_URL) instead of a temporary one per command. A command that needs another key says so itself
  (`VDS_API_KEY=test_enterprise fleet lookup ...`); `$VDS_BASE_URL` in a command is that sandbox.
- A ```python block is run the same way, with the venv's Python, in its place in the order. A ```sql
  block's statements run on a read-only connection to the folder's `data/fleet.duckdb`.
- A ```text block is never run: commands that cannot run here (another terminal, a long-running server or
  worker, a Dask cluster, object storage, the real service, `make test` itself) with the reason in a `#`
  comment, and outputs. A placeholder for the reader's own value is written `<like_this>`, and only there.
- No other fence for commands (```sh, ```shell, ```console, or none): a command is either run or says why not.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import httpx
import pytest
import yaml

from tests.prefect_server import prefect_server, stop_group

ROOT = Path(__file__).resolve().parents[1]
GENERATED = {"data-dictionary.md"}
RUN = {"bash", "python", "sql"}
SHOWN = {"text", "toml", "yaml", "json", "csv"}  # never run: outputs, files, commands with their reason
BLOCK_TIMEOUT = 420  # `make demo` on two busy cores: a bound that says "it did not hang", not a timing
SANDBOX_KEY = "sandbox_demo_key"  # flows/target.py's key for the embedded sandbox
COMMAND_WORDS = ("fleet ", "make ", "prefect ", "python", ".venv/", "pip ", "dask", "curl ", "export ", "source ", "mkdocs")
PLACEHOLDER = re.compile(r"<[a-z][a-z0-9_.-]*>")
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```", flags=re.S | re.M)
pytestmark = pytest.mark.timeout(1800)


@dataclass
class Block:
    page: str
    line: int
    language: str
    code: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.language})"


class _MkdocsLoader(yaml.SafeLoader):
    """mkdocs.yml may hold `!!python/name:` tags (Material's extensions): read as None, only the nav matters here."""


_MkdocsLoader.add_multi_constructor("", lambda loader, suffix, node: None)


def pages() -> list[str]:
    """README.md, then every docs page in the nav's order."""
    def walk(items: list) -> Iterator[str]:
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            yield from walk(value) if isinstance(value, list) else [value]

    nav = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_MkdocsLoader)["nav"]
    return ["README.md"] + [f"docs/{name}" for name in walk(nav) if name not in GENERATED]


def blocks(page: str) -> list[Block]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return [Block(page, text.count("\n", 0, m.start()) + 1, m.group(1).strip(), m.group(2)) for m in FENCE.finditer(text)]


# --- what can be checked without running anything ------------------------------------------------------------


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


def test_every_page_with_commands_is_run():
    docs = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert set(pages()) == {"README.md"} | {f"docs/{name}" for name in docs if name not in GENERATED}


@pytest.mark.parametrize("page", pages())
def test_every_block_is_run_or_says_why_not(page):
    for block in blocks(page):
        assert block.language in RUN | SHOWN, f"{block}: a fence is ```bash (run) or ```text (not run, with the reason)"
        if block.language in ("bash", "python"):
            assert not PLACEHOLDER.search(block.code), f"{block}: a placeholder goes in a ```text block"
        if block.language == "text":
            commands = [line for line in block.code.splitlines() if line.lstrip().startswith(COMMAND_WORDS)]
            assert not commands or "#" in block.code, f"{block}: say in a # comment why this is not run: {commands[0]}"


@pytest.mark.parametrize("page", ["README.md"])
def test_the_readmes_links_reach_files(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"{page} links to {target}, which does not exist"


# --- running them -------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _checkout_copy(folder: Path) -> None:
    """The checkout's files as git would give them (tracked, or new and not ignored), and the venv linked in."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_symlink():  # src/fleet_data/<folder> -> ../../<folder>: a link, as git checks it out
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).symlink_to(os.readlink(source))
        elif source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    # A venv of links to this one, with a stamp of its own newer than the lockfile: make sees it installed and
    # never writes into the real one. Its own folder (not a link to it) so Python finds pyvenv.cfg beside bin/.
    venv = folder / ".venv"
    venv.mkdir()
    for entry in Path(sys.prefix).iterdir():
        if not entry.name.startswith(".installed"):
            (venv / entry.name).symlink_to(entry)
    for stamp in (".installed-runtime", ".installed-dev"):  # the Makefile's, one per lock, runtime first
        (venv / stamp).touch()


@contextlib.contextmanager
def _sandbox(env: dict[str, str]) -> Iterator[str]:
    """`fleet sandbox`, standing, on a free loopback port; stopped by its PID."""
    port = _free_port()
    process = subprocess.Popen([str(Path(sys.prefix) / "bin" / "fleet"), "sandbox", "--port", str(port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, "fleet sandbox exited"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/openapi.yaml", timeout=2, trust_env=False).status_code == 200:
                    break
            assert time.monotonic() < deadline, "fleet sandbox did not answer"
            time.sleep(0.3)
        yield url
    finally:
        stop_group(process)


@dataclass
class Workspace:
    folder: Path
    env: dict[str, str]
    done: dict[str, list[str]] = field(default_factory=dict)  # page -> what failed in it

    def run_through(self, page: str) -> list[str]:
        """Runs every page up to `page` (in order, once each); what failed in `page`."""
        for name in pages():
            if name not in self.done:
                self.done[name] = [failure for block in blocks(name) if (failure := self.run(block))]
            if name == page:
                return self.done[name]
        raise AssertionError(f"{page} is not in mkdocs.yml's nav")

    def run(self, block: Block) -> str | None:
        if block.language == "sql":
            return self._sql(block)
        if block.language not in ("bash", "python"):
            return None
        command = ["bash", "-e", "-o", "pipefail", "-c", block.code] if block.language == "bash" else [
            str(self.folder / ".venv" / "bin" / "python"), "-c", block.code]
        try:
            done = subprocess.run(command, cwd=self.folder, env=self.env, capture_output=True, text=True,
                                  timeout=BLOCK_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            return f"{block}: still running after {BLOCK_TIMEOUT} s:\n{block.code}"
        if done.returncode != 0:
            return (f"{block} exited {done.returncode}:\n{block.code}\n--- stdout:\n{done.stdout[-2000:]}\n"
                    f"--- stderr:\n{done.stderr[-3000:]}")
        return None

    def _sql(self, block: Block) -> str | None:
        statements = [s for s in re.split(r";\s*\n", block.code)
                      if any(line.strip() and not line.strip().startswith("--") for line in s.splitlines())]
        try:
            with duckdb.connect(str(self.folder / "data" / "fleet.duckdb"), read_only=True) as con:
                rows = [len(con.sql(statement).fetchall()) for statement in statements]
        except duckdb.Error as exc:
            return f"{block}: {exc}"
        return None if any(rows) else f"{block}: no statement returned a row on the demo's database"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Iterator[Workspace]:
    folder = tmp_path_factory.mktemp("checkout")
    _checkout_copy(folder)
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("VDS_", "PREFECT_", "FLEET_", "VIRTUAL_ENV"))}
    base = {**inherited, "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "NO_MKDOCS_2_WARNING": "1"}
    with _sandbox(base) as url, prefect_server() as prefect:
        env = {**base, **prefect, "VDS_BASE_URL": url, "VDS_API_KEY": SANDBOX_KEY,
               "VIRTUAL_ENV": str(folder / ".venv"), "PATH": f"{folder / '.venv' / 'bin'}{os.pathsep}{base.get('PATH', '')}"}
        yield Workspace(folder, env)


@pytest.mark.parametrize("page", pages())
def test_the_page_runs_as_written(workspace, page):
    failures = workspace.run_through(page)
    assert not failures, "\n\n".join(failures)


def test_make_demo_left_what_the_readme_says(workspace):
    workspace.run_through("README.md")
    data = workspace.folder / "data"
    for name in ("fleet.duckdb", "lake/report.html", "lake/todo.csv", "fleet.report.html"):
        assert (data / name).is_file(), name
    with duckdb.connect(str(data / "fleet.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM vehicles").fetchone() == (996,)  # the README's "996 VINs"


def test_the_analysts_own_table_stays_in_their_own_file(workspace):
    # docs/analysts.md's ATTACH block writes a table into the analyst's file, ours attached read-only; the runs after
    # it (docs/connector.md's backfill publishes) find the published file as they left it, so nothing is set aside.
    workspace.run_through("docs/connector.md")
    data = workspace.folder / "data"
    with duckdb.connect(str(data / "my_analysis.duckdb"), read_only=True) as con:
        assert con.execute("SELECT table_name FROM duckdb_tables()").fetchall() == [("my_watch_list",)]
    assert not list(data.glob("*.changed-*"))
