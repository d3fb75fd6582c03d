"""Every wait of a run has a deadline, and a stop signal ends the command within seconds on a loaded machine.

Each case runs `fleet refresh` in its own process (its own temporary Prefect server) against a sandbox in
another process, as a user or cron would:
- a `--notify` receiver that trickles its answer one byte every 2 s (httpx's per-read timeout never trips):
  the run ends at the notification's deadline, reports the failure in its summary and leaves the lock;
- SIGTERM while that post is stuck: the command exits within 10 s;
- SIGTERM mid-fetch with two busy processes beside it: the command exits within 10 s, the run is recorded
  `cancelled` with its end time, and every answer paid for lands (the next run lands the journals).

The bounds are generous upper limits for "it did not hang", not timings: before the deadlines, the first
case never ended and the signalled ones took 20-90 s (docs/stopping.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from fleet_data.connectors.sandbox import Sandbox
from fleet_data.tasks.exitcodes import CANCELLED, COMPLETED
from fleet_data.tasks.ingest.fleet_files import read_fleet
from fleet_data.tasks.run import lock as runlock
from fleet_data.tasks.store.database import open_database

from ..connectors.receiver import TrickleReceiver
from .test_stopping import PER_VIN, next_run_lands_every_answer_paid

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_fleet.csv"
CHANGED_VIN = "1G1FB1RX0GU436062"
STOPPED_WITHIN = 10.0  # seconds from SIGTERM to the command's exit: the goal, on a loaded machine


@pytest.fixture(scope="module")
def sandbox():
    sandbox = Sandbox.start_subprocess(["--latency-ms", "150", "--journal"])
    yield sandbox
    sandbox.stop()


def _env(sandbox: Sandbox, key: str, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API_URL", "VDS_", "FLEET_"))}
    return env | {"PYTHONPATH": str(ROOT), "PREFECT_HOME": str(home), "VDS_BASE_URL": sandbox.url,
                  "VDS_API_KEY": key, "FLEET_PREFECT_SERVER": "temporary", **extra}


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", *args]
    # Its own process group, so that teardown can clean up whatever the command left.
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log.open("wb"),
                            start_new_session=True)


def _kill_group(run: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        run.wait(timeout=10)


@pytest.fixture(scope="module")
def changed(sandbox, tmp_path_factory):
    """A database refreshed once (specs of a few VINs), then the service told one of them changed."""
    folder = tmp_path_factory.mktemp("first")
    fleet = folder / "fleet.csv"
    roster = read_fleet([str(SAMPLE)]).roster.head(40)
    assert CHANGED_VIN in roster["vin"].to_list()
    roster.select("unit_number", "vin", "state", "mileage").write_csv(fleet)
    db = folder / "fleet.duckdb"
    run = _start([str(fleet), "--db", str(db), "--lake", "", "--datasets", "specs", "--json"],
                 _env(sandbox, "deadline_first", folder / "prefect-home"), folder / "run.log")
    try:
        run.communicate(timeout=300)
    finally:
        _kill_group(run)
    assert run.returncode == COMPLETED, (folder / "run.log").read_text()[-3000:]
    sandbox.set_vehicle(CHANGED_VIN, specs={"trim": "Changed Trim"})
    return fleet, db


def _copy(db: Path, into: Path) -> Path:
    """The database and its working store, as a second refresh finds them."""
    for path in db.parent.glob(db.name + "*"):
        if not path.name.endswith((".lock", ".progress.json")):
            shutil.copy2(path, into / path.name)
    return into / db.name


def _notify_run(changed, sandbox, tmp_path: Path, url: str, **deadlines: str) -> subprocess.Popen:
    fleet, base = changed
    db = _copy(base, tmp_path)
    env = _env(sandbox, "deadline_notify", tmp_path / "prefect-home", **deadlines)
    return _start([str(fleet), "--db", str(db), "--lake", "", "--datasets", "specs", "--force", "--json",
                   "--notify", url], env, tmp_path / "run.log")


def _lock_is_free(db: Path) -> bool:
    try:
        runlock.acquire(str(db), "deadline-probe", "refresh", wait=False)
    except runlock.RunLocked:
        return False
    runlock.release(str(db))
    return True


def test_a_stuck_notify_receiver_ends_at_the_notification_deadline(changed, sandbox, tmp_path):
    with TrickleReceiver(every=2.0) as receiver:
        run = _notify_run(changed, sandbox, tmp_path, receiver.url,
                          FLEET_NOTIFY_ATTEMPT_SECONDS="3", FLEET_NOTIFY_SECONDS="8")
        try:
            deadline = time.monotonic() + 300  # Prefect's start and the fetch, on a busy 2-core machine
            while not receiver.connections:
                assert run.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the run never posted"
                time.sleep(0.1)
            try:
                out, _ = run.communicate(timeout=60)  # the deadline is 8 s: generous, for a loaded machine
            except subprocess.TimeoutExpired:
                pytest.fail("still running 60 s after it started posting to a receiver that trickles")
        finally:
            _kill_group(run)
    log = (tmp_path / "run.log").read_text()
    assert run.returncode == COMPLETED, log[-3000:]  # a notification never changes the run's outcome
    summary = json.loads(out)
    assert summary["status"] == "completed" and summary["changes"]["total"] >= 1
    notification = summary["notification"]
    assert notification["sent"] is False and notification["status"] is None
    assert "no whole answer within" in notification["error"] and "secretpart" not in json.dumps(notification)
    assert 1 <= notification["attempts"] == receiver.connections
    assert "Traceback" not in log
    assert _lock_is_free(tmp_path / "fleet.duckdb")  # released: the next refresh is not refused with 75


def test_sigterm_during_a_stuck_notify_exits_within_seconds(changed, sandbox, tmp_path):
    with TrickleReceiver(every=2.0) as receiver:
        run = _notify_run(changed, sandbox, tmp_path, receiver.url,
                          FLEET_NOTIFY_ATTEMPT_SECONDS="600", FLEET_NOTIFY_SECONDS="600")
        try:
            deadline = time.monotonic() + 300
            while not receiver.connections:
                assert run.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the run never posted"
                time.sleep(0.1)
            os.kill(run.pid, signal.SIGTERM)
            try:
                out, _ = run.communicate(timeout=STOPPED_WITHIN)
            except subprocess.TimeoutExpired:
                pytest.fail(f"still running {STOPPED_WITHIN:g} s after SIGTERM during a stuck notification")
        finally:
            _kill_group(run)
    log = (tmp_path / "run.log").read_text()
    # The run had finished and was recorded before it posted: its outcome stands, the post is what stopped.
    assert run.returncode == COMPLETED, log[-3000:]
    notification = json.loads(out)["notification"]
    assert notification["sent"] is False and "stopped" in notification["error"]
    assert "Traceback" not in log
    with open_database(str(tmp_path / "fleet.duckdb")) as store:
        assert store.sql("SELECT status FROM runs ORDER BY started_at DESC LIMIT 1").item() == "completed"


@pytest.fixture
def cpu_hogs():
    """Two busy processes beside the run (the machine has 2 cores): stopped by PID in teardown."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield hogs
    for hog in hogs:
        hog.kill()
        hog.wait(timeout=10)


def _wait_for_answers(run: subprocess.Popen, db: Path, log: Path, least: int) -> None:
    progress = Path(f"{db}.progress.json")
    deadline = time.monotonic() + 300
    while True:
        assert run.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "no answer came in"
        try:
            state = json.loads(progress.read_text())
        except (FileNotFoundError, ValueError):
            state = None
        if state and sum(d["done"] for d in state["datasets"].values()) >= least:
            return
        time.sleep(0.1)


def test_sigterm_mid_fetch_on_a_loaded_machine_exits_within_seconds_with_nothing_lost(sandbox, tmp_path, request):
    fleet, db, log = tmp_path / "fleet.csv", tmp_path / "fleet.duckdb", tmp_path / "run.log"
    read_fleet([str(SAMPLE)]).roster.head(400).select("unit_number", "vin", "state", "mileage").write_csv(fleet)
    key = "deadline_sigterm"
    run = _start([str(fleet), "--db", str(db), "--lake", str(tmp_path / "lake"), "--datasets",
                  ",".join(PER_VIN.values()), "--chunk-size", "50", "--concurrency", "8"],
                 _env(sandbox, key, tmp_path / "prefect-home"), log)
    started: list[psutil.Process] = []
    try:
        _wait_for_answers(run, db, log, least=40)
        started = psutil.Process(run.pid).children(recursive=True)
        request.getfixturevalue("cpu_hogs")  # the machine loaded from here on
        os.kill(run.pid, signal.SIGTERM)
        try:
            run.wait(timeout=STOPPED_WITHIN)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {STOPPED_WITHIN:g} s after SIGTERM: {log.read_text()[-3000:]}")
    finally:
        _kill_group(run)
    assert run.returncode == CANCELLED, log.read_text()[-3000:]
    assert "Traceback" not in log.read_text()
    deadline = time.monotonic() + 20
    while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in started):  # Prefect's server went too
        assert time.monotonic() < deadline, [p.pid for p in started if p.is_running()]
        time.sleep(0.2)

    with open_database(str(db)) as store:
        (run_id, status, finished), = store.sql("SELECT run_id, status, finished_at FROM runs").rows()
        assert status == "cancelled" and finished is not None  # its end recorded before it exited
        assert sum(dict(store.sql("SELECT dataset, pending FROM run_datasets WHERE run_id = $r",
                                  {"r": run_id}).rows()).values()) > 0
        next_run_lands_every_answer_paid(store, db, sandbox.journal(), key)  # nothing paid is lost
