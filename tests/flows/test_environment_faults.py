"""Faults of the machine around a command are the user's to fix, not bugs (issue 20).

A damaged database file (published or working store: random bytes, cut short), a folder where the
working store belongs, a fleet file that vanished between the check and the read, an undecodable
`fleet.toml`, a lake folder the run cannot write: each gives ONE line on stderr (what, where, what to do)
and exit 2, never "this is a bug" and never a traceback; `fleet refresh` says so before anything is
called (nothing paid). A folder made unwritable mid-run is still one line, and Prefect's tracebacks of it
stay off the terminal (flows/quiet_faults.py).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from fleet_data.flows.cli import main
from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.store.files import working_path
from fleet_data.tasks.store.published import publish_file

ROOT = Path(__file__).resolve().parents[2]
VIN = "1HGCM82633A004352"


@pytest.fixture(autouse=True)
def no_service(monkeypatch, tmp_path):
    # Without a key the CLI would start the embedded sandbox: a refused command must not get that far.
    for name in ("VDS_API_KEY", "VDS_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name in [n for n in os.environ if n.startswith("FLEET_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no fleet.toml of the checkout's


@pytest.fixture
def fleet(tmp_path) -> Path:
    path = tmp_path / "fleet.csv"
    path.write_text(f"vin,unit\n{VIN},1\n")
    return path


@pytest.fixture(scope="module")
def whole_database(tmp_path_factory) -> bytes:
    """A real published database's bytes (for cutting short)."""
    db = tmp_path_factory.mktemp("whole") / "fleet.duckdb"
    with open_database(db) as store:
        store.start_run("refresh", ["fleet.csv"], {}, run_id="r1")
        store.land("vehicles", pl.DataFrame({"vin": [VIN], "unit_number": ["U-1"]}), "r1")
    publish_file(db)
    return db.read_bytes()


def damage(kind: str, whole: bytes) -> bytes:
    if kind == "random bytes":
        return os.urandom(100_000)
    return whole[: len(whole) // 3]  # cut short, as by a copy that died half-way


def the_one_line(err: str, *phrases: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and "bug" not in err
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    return lines[0]


# --- the database files ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["random bytes", "cut short"])
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "refresh"])
def test_a_damaged_published_database_is_refused_in_one_line(kind, dry_run, whole_database, fleet, tmp_path, capsys):
    db = tmp_path / "fleet.duckdb"
    db.write_bytes(damage(kind, whole_database))
    code = main(["refresh", str(fleet), "--db", str(db), "--lake", "", *(["--dry-run"] if dry_run else [])])
    out, err = capsys.readouterr()
    line = the_one_line(err, f"{db}: ", "damaged", "move it aside")
    assert code == 2
    assert ".working" not in line and not working_path(db).exists()  # no copy of the damaged file left behind
    assert out == ""  # nothing started: no sandbox, no Prefect


@pytest.mark.parametrize("kind", ["random bytes", "cut short"])
def test_a_damaged_working_store_is_refused_in_one_line(kind, whole_database, fleet, tmp_path, capsys):
    db = tmp_path / "fleet.duckdb"
    working_path(db).write_bytes(damage(kind, whole_database))
    code = main(["refresh", str(fleet), "--db", str(db), "--lake", ""])
    line = the_one_line(capsys.readouterr().err, f"{working_path(db)}: ", "working store", "damaged")
    assert "another process" not in line
    assert code == 2


def test_a_folder_where_the_working_store_belongs_is_refused_in_one_line(fleet, tmp_path, capsys):
    db = tmp_path / "fleet.duckdb"
    working_path(db).mkdir()
    code = main(["refresh", str(fleet), "--db", str(db), "--lake", ""])
    line = the_one_line(capsys.readouterr().err, f"{working_path(db)}: ", "is a folder")
    assert "another process" not in line
    assert code == 2


@pytest.mark.parametrize("kind", ["random bytes", "cut short"])
@pytest.mark.parametrize("command", ["status", "report"])
def test_read_only_commands_refuse_a_damaged_published_database(kind, command, whole_database, tmp_path, capsys):
    db = tmp_path / "fleet.duckdb"
    db.write_bytes(damage(kind, whole_database))
    assert main([command, "--db", str(db)]) == 2
    the_one_line(capsys.readouterr().err, f"{db}: ", "damaged")


# --- the fleet file and the project file ----------------------------------------------------------------------


@pytest.mark.parametrize("content", [b'db = "\xff\xfe.duckdb"\n', "db = 'fleet.duckdb'\n".encode("utf-16")],
                         ids=["latin-1 byte", "utf-16"])
@pytest.mark.parametrize("command", ["status", "refresh"])
def test_a_fleet_toml_that_is_not_utf8_is_one_line(content, command, fleet, tmp_path, capsys):
    (tmp_path / "fleet.toml").write_bytes(content)
    argv = ["status"] if command == "status" else ["refresh", str(fleet)]
    assert main(argv) == 2
    the_one_line(capsys.readouterr().err, "fleet.toml", "not UTF-8", "save it as UTF-8")


@pytest.mark.parametrize("content,phrase", [
    ('db = "fleet\\u0000.duckdb"\n', "NUL character"),  # a path Python cannot even ask the OS about
    ("db = [\n", "not valid TOML"),
], ids=["nul in a path", "cut short"])
def test_a_malformed_fleet_toml_is_one_line(content, phrase, fleet, tmp_path, capsys):
    (tmp_path / "fleet.toml").write_text(content, encoding="utf-8")
    assert main(["refresh", str(fleet), "--dry-run"]) == 2
    the_one_line(capsys.readouterr().err, "fleet.toml", phrase)


# --- folders the run cannot write -----------------------------------------------------------------------------


def _read_only(folder: Path) -> list[str]:
    """A prefix that runs a command with `folder` read-only: a read-only bind mount for root (who may write
    anywhere), the folder's permissions for anyone else."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return []
    if shutil.which("unshare") is None:
        pytest.skip("root, and no unshare to mount a folder read-only")
    return ["unshare", "--mount", "sh", "-c", f'mount --bind "{folder}" "{folder}" && '
            f'mount -o remount,bind,ro "{folder}" "{folder}" && exec "$@"', "sh"]


def test_a_lake_partition_folder_the_run_cannot_write_is_refused_before_any_call(fleet, tmp_path):
    lake = tmp_path / "lake"
    (lake / "specs" / "vin_bucket=13").mkdir(parents=True)
    prefix = _read_only(lake / "specs")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VDS_", "FLEET_"))}
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fleet),
         "--db", str(tmp_path / "fleet.duckdb"), "--lake", str(lake)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=env | {"PYTHONPATH": str(ROOT), "FLEET_PREFECT_SERVER": "temporary"},
    )  # fmt: skip
    if prefix and "mount" in done.stderr and done.returncode != 2:
        pytest.skip(f"cannot mount read-only here: {done.stderr.strip()[:200]}")
    the_one_line(done.stderr, str(lake / "specs"), "not writable")
    assert done.returncode == 2
    assert done.stdout == "" and not working_path(tmp_path / "fleet.duckdb").exists()  # nothing started, nothing paid


def _lake_replaced_by_a_file(fleet: Path, lake: Path) -> Path:
    lake.write_text("not a folder any more")
    return lake


def _fleet_file_moved_away(fleet: Path, lake: Path) -> Path:
    fleet.rename(fleet.with_name("moved.csv"))  # a sync tool, a colleague: after the command read it once
    return fleet


def _database_replaced_by_a_folder(fleet: Path, lake: Path) -> Path:
    db = lake.parent / "fleet.duckdb"
    db.unlink(missing_ok=True)  # published at once, a first run's file: a folder takes its place
    db.mkdir()
    return db


@pytest.mark.usefixtures("prefect_server")
@pytest.mark.parametrize("fault", [_lake_replaced_by_a_file, _fleet_file_moved_away, _database_replaced_by_a_folder],
                         ids=["lake", "fleet file", "database"])
def test_a_path_gone_mid_run_is_one_line_without_prefect_tracebacks(fault, service, fleet, tmp_path, capsys, caplog,
                                                                    monkeypatch):
    from fleet_data.flows import commands

    service()
    lake, where = tmp_path / "lake", []
    started = commands.start_prefect

    def then_the_fault(*args: bool) -> None:  # after every check and the first read: inside the flow
        started(*args)
        where.append(fault(fleet, lake))

    monkeypatch.setattr(commands, "start_prefect", then_the_fault)
    code = main(["refresh", str(fleet), "--db", str(tmp_path / "fleet.duckdb"), "--lake", str(lake),
                 "--datasets", "specs"])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "this is a bug" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {where[0]}: "), err
    assert code == 2
    # What Prefect logged of it reached no terminal handler (caplog's sits beside Prefect's console handler).
    shown = [r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("prefect")]
    assert shown == [], [r.getMessage() for r in shown]


def test_a_prefect_server_named_and_down_is_one_line_before_any_call(fleet, tmp_path):
    """Issue 28: PREFECT_API_URL naming a server that is not there ended in "this is a bug" after 12 s of
    Prefect's retries. It is now one line (exit 2) before the service is asked anything."""
    import json
    import socket

    from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox

    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with run_sandbox(SandboxConfig(journal=True)) as sandbox:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "VDS_", "FLEET_"))} | {
            "PYTHONPATH": str(ROOT), "VDS_API_KEY": "prefect_down_key", "VDS_BASE_URL": sandbox.url,
            "PREFECT_API_URL": f"http://user:s3cret@127.0.0.1:{port}/api"}
        done = subprocess.run([sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fleet), "--db",
                               str(tmp_path / "fleet.duckdb"), "--lake", "", "--json"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        called = sandbox.count(key="prefect_down_key")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stdout[-2000:] + done.stderr[-3000:]
    error = json.loads(lines[0])["error"]
    assert error["kind"] == "usage" and f"127.0.0.1:{port}/api (PREFECT_API_URL) does not answer" in error["message"]
    assert "s3cret" not in done.stdout + done.stderr
    assert called == 0  # nothing was asked, not even the key check
