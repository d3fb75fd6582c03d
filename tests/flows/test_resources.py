"""What a run does when its machine fails it: a disk that fills, a store or lock file that vanishes.

Each test runs `fleet refresh` as a child process against a sandbox in its own process, whose per-key
billing is the referee (as in tests/flows/test_resume.py), and disturbs the run while it calls:

- a full disk: the database sits on a small tmpfs the test mounts (we run as root; skipped where mount
  is refused); once the run is calling, the test fills that disk to the last byte. The run must stop
  calling, land what it has, leave no `.publishing` copy, record itself `failed` with the reason and
  exit 6 with one line; once the space is freed, the rerun completes, and across both runs the service
  billed exactly what an uninterrupted run is billed, all of it in `api_calls`: nothing paid twice.
- the working store deleted mid-run: exit 7, one line, and the published file untouched.
- the lock file deleted mid-run: a second run gets in past our lock, meets DuckDB's, and is busy
  (exit 75), not a usage error; the first one sees its lock gone and stops without publishing (7).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet_data.connectors.sandbox import Sandbox
from fleet_data.tasks.store.database import open_database
from tests.small_disk import tmpfs

from .conftest import sample_rows

pytestmark = [pytest.mark.usefixtures("prefect_server"), pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]
BOUND = 420  # seconds: a hang guard for one child run on a loaded machine, not a timing
OPTIONS = ["--datasets", "specs,market_value", "--chunk-size", "8", "--concurrency", "2", "--lake", "", "--json"]


@pytest.fixture(scope="module")
def slow_sandbox():
    """In its own process, slow enough (40 ms a call) for a test to act while a run calls."""
    sandbox = Sandbox.start_subprocess(["--latency-ms", "40"])
    yield sandbox
    sandbox.stop()


class Run:
    """`fleet refresh --json` in a child process; its output in files (a full pipe would stall it)."""

    def __init__(self, fleet: str, db: str, sandbox: Sandbox, key: str, logs: Path, env: dict | None = None,
                 options: list[str] = OPTIONS):
        from prefect.settings import PREFECT_API_URL

        logs.mkdir(parents=True, exist_ok=True)
        self.out, self.err = logs / "stdout", logs / "stderr"
        environment = {**os.environ, "VDS_BASE_URL": sandbox.url, "VDS_API_KEY": key, "PYTHONPATH": str(ROOT),
                       "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_LOGGING_TO_API_ENABLED": "false",
                       **(env or {})}
        command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", fleet, "--db", db, *options]
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=out, stderr=err)

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self) -> int:
        try:
            return self.process.wait(timeout=BOUND)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"the run did not end within {BOUND} s:\n{self.stderr()[-2000:]}") from None

    def stop(self) -> None:
        if self.running():
            self.process.kill()
            self.process.wait(timeout=30)

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def error(self) -> dict:
        """The one line a failed run prints (`--json`: the error object on stdout), with no traceback anywhere."""
        lines = self.stdout().splitlines()
        assert len(lines) == 1, self.stdout()[-2000:] + self.stderr()[-2000:]
        assert "Traceback" not in self.stderr(), self.stderr()[-3000:]
        return json.loads(lines[0])["error"]


def _wait_for(condition, run: Run, what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not condition():
        assert run.running(), f"the run ended before {what}:\n{run.stdout()[-1000:]}\n{run.stderr()[-2000:]}"
        assert time.monotonic() < deadline, f"no {what} within {BOUND} s"
        time.sleep(0.05)


def _paid(sandbox: Sandbox, key: str) -> int:
    return sandbox.count(key=key, status=200)


def _rows(db: str, sql: str) -> list[tuple]:
    with open_database(db) as store:
        return store.sql(sql).rows()


@pytest.fixture
def small_disk(tmp_path):
    """A 48 MB tmpfs mounted for the test (unmounted after it), or a skip where mounting is not allowed."""
    with tmpfs(tmp_path / "disk", "48m") as disk:
        yield disk


def _fill(disk: Path) -> Path:
    """Write a file on `disk` until the disk is full to the last byte."""
    ballast = disk / "ballast"
    with ballast.open("wb", buffering=0) as out:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    out.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    return ballast


def test_a_disk_that_fills_stops_the_run_and_nothing_is_paid_twice(slow_sandbox, small_disk, tmp_path):
    fleet = tmp_path / "fleet.csv"
    sample_rows(96).write_csv(fleet)
    reference = Run(str(fleet), str(tmp_path / "reference" / "fleet.duckdb"), slow_sandbox, "space_reference",
                    tmp_path / "reference")
    db, key = str(small_disk / "fleet.duckdb"), "space_full"
    limits = {"FLEET_MIN_FREE_MB": "1", "FLEET_RESERVE_MB": "4"}
    first = Run(str(fleet), db, slow_sandbox, key, tmp_path / "first", limits)
    try:
        _wait_for(lambda: _paid(slow_sandbox, key) >= 40, first, "40 paid calls")
        ballast = _fill(small_disk)
        code = first.wait()
        error = first.error()
        assert (code, error["code"], error["kind"]) == (6, 6, "no_space"), error
        assert error["message"].startswith("disk full:"), error
        assert not Path(db + ".publishing").exists() and not Path(db + ".reserve").exists()
        paid_before = slow_sandbox.units(key)

        ballast.unlink()  # the space is freed: the rerun completes what the first one left
        status, message = _rows(db, "SELECT status, message FROM runs")[0]
        assert status == "failed" and message.startswith("disk full:"), (status, message)
        again = Run(str(fleet), db, slow_sandbox, key, tmp_path / "again", limits)
        assert again.wait() == 0, again.stdout()[-2000:] + again.stderr()[-2000:]
        assert reference.wait() == 0, reference.stderr()[-2000:]
    finally:
        for run in (first, reference, *([again] if "again" in locals() else [])):
            run.stop()

    billed = slow_sandbox.units(key)
    uninterrupted = slow_sandbox.units("space_reference")
    assert _rows(db, "SELECT sum(units) FROM api_calls") == [(billed,)]  # every unit billed was recorded
    assert billed == uninterrupted, (paid_before, billed, uninterrupted)  # and none bought twice
    assert 0 < paid_before < billed  # the first run stopped half-way
    assert _rows(db, "SELECT status FROM runs ORDER BY started_at") == [("failed",), ("completed",)]


def _started(db: str, sandbox: Sandbox, key: str, logs: Path, fleet: str, options: list[str] = OPTIONS) -> Run:
    run = Run(fleet, db, sandbox, key, logs, options=options)
    _wait_for(lambda: _paid(sandbox, key) >= 6, run, "6 paid calls")
    return run


def test_a_working_store_deleted_mid_run_stops_it_without_publishing(slow_sandbox, tmp_path):
    fleet = tmp_path / "fleet.csv"
    sample_rows(96).write_csv(fleet)
    db = tmp_path / "fleet.duckdb"
    run = _started(str(db), slow_sandbox, "store_deleted", tmp_path / "run", str(fleet))
    try:
        published = db.read_bytes(), db.stat().st_ino  # published when the run started
        Path(str(db) + ".working").unlink()
        code = run.wait()
    finally:
        run.stop()
    error = run.error()
    assert (code, error["code"], error["kind"]) == (7, 7, "store_lost"), error
    assert "was deleted during the run" in error["message"] and "without publishing" in error["message"], error
    assert (db.read_bytes(), db.stat().st_ino) == published  # no publish happened
    assert not Path(str(db) + ".publishing").exists()


def test_a_second_run_let_in_by_a_deleted_lock_file_is_busy(slow_sandbox, tmp_path):
    fleet = tmp_path / "fleet.csv"
    # The first run looks at its lock before each chunk: one chunk per dataset of 480 VINs (some 10 s at 40 ms a
    # call, two at a time) keeps it calling, and holding the store, while the second run starts on a busy machine.
    sample_rows(480).write_csv(fleet)
    db = tmp_path / "fleet.duckdb"
    long_chunks = [*OPTIONS[:OPTIONS.index("--chunk-size")], "--chunk-size", "480",
                   *OPTIONS[OPTIONS.index("--chunk-size") + 2:]]
    first = _started(str(db), slow_sandbox, "lock_deleted", tmp_path / "first", str(fleet), long_chunks)
    try:
        published = db.read_bytes(), db.stat().st_ino
        Path(str(db) + ".lock").unlink()
        second = Run(str(fleet), str(db), slow_sandbox, "lock_second", tmp_path / "second")
        code = second.wait()
        error = second.error()
        assert (code, error["code"], error["kind"]) == (75, 75, "busy"), error
        assert "in use by another run" in error["message"], error
        assert slow_sandbox.count(key="lock_second") == 0  # refused before calling anything
        # The first run finds its lock file replaced (the second run made a new one): it stops, unpublished.
        code = first.wait()
    finally:
        first.stop()
    error = first.error()
    assert (code, error["kind"]) == (7, "store_lost"), error
    assert ".lock was" in error["message"], error
    assert (db.read_bytes(), db.stat().st_ino) == published


def test_a_lock_lost_after_the_runs_last_check_ends_in_one_error_line(service, tmp_path, monkeypatch, capsys):
    """The lock file deleted once the run has settled its status (here: while its report is written), before the
    last publish: that publish is refused, so the command must say only that (exit 7, one line), not a summary
    that says `completed` followed by the error. Before the fix the summary was printed before the last publish."""
    from fleet_data.flows.cli import main
    from fleet_data.tasks.steps import refresh_steps

    fleet, db = tmp_path / "fleet.csv", tmp_path / "fleet.duckdb"
    sample_rows(6).write_csv(fleet)
    write_report = refresh_steps.write_run_report

    def report_then_lose_the_lock(*args, **kwargs):
        written = write_report(*args, **kwargs)
        Path(str(db) + ".lock").unlink()
        return written

    monkeypatch.setattr(refresh_steps, "write_run_report", report_then_lose_the_lock)
    code = main(["refresh", str(fleet), "--db", str(db), "--datasets", "specs", "--lake", "", "--json"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1, lines
    error = json.loads(lines[0])["error"]
    assert (code, error["kind"]) == (7, "store_lost"), error
    assert ".lock was deleted" in error["message"], error
    assert _rows(str(db) + ".working", "SELECT status FROM runs") == [("failed",)]
