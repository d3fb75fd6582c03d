"""One database, many users: analysts read while a refresh writes, `fleet status` watches, and a
second run waits its turn or is refused before it calls anything.

Each test runs `fleet` in child processes against a sandbox this test starts (with latency, so the
runs overlap), with a key of its own, and compares what the pipeline recorded with what the sandbox
itself billed that key. The children share the session's Prefect test server (PREFECT_API_URL), so
no child spends 15 s starting one. Every loop is bounded and every child is stopped by its PID.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from fleet_data.connectors.sandbox import FaultConfig

pytestmark = pytest.mark.usefixtures("prefect_server")
ROOT = Path(__file__).resolve().parents[2]
EX_TEMPFAIL = 75
DEADLINE = 240  # seconds any one child may take on a busy 2-core machine before the test gives up
DATASETS = "specs,market_value,history"
SLOW = FaultConfig(latency_ms=60)


def _env(sandbox, key: str, **extra: str) -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, "VDS_BASE_URL": sandbox.url, "VDS_API_KEY": key, "PYTHONPATH": str(ROOT),
            "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_LOGGING_TO_API_ENABLED": "false", **extra}


class Fleet:
    """`fleet ...` in a child process; its output in files (a full pipe would stall it)."""

    def __init__(self, workdir: Path, name: str, args: list[str], env: dict[str, str]):
        self.out, self.err = workdir / f"{name}.out", workdir / f"{name}.err"
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.process = subprocess.Popen([sys.executable, "-m", "fleet_data.flows.cli", *args], cwd=ROOT, env=env,
                                            stdout=out, stderr=err)

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self) -> int:
        try:
            return self.process.wait(timeout=DEADLINE)
        finally:
            self.stop()

    def stop(self) -> None:
        if self.running():
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def summary(self) -> dict:
        return json.loads(self.stdout())


def _refresh_args(fleet: str, db: str, *more: str) -> list[str]:
    return ["refresh", fleet, "--db", db, "--lake", "", "--datasets", DATASETS, "--chunk-size", "10",
            "--concurrency", "2", "--json", *more]


def _published(db: str, sql: str) -> list[tuple]:
    """A read-only look at what is published, as an analyst's notebook would take it (and let go)."""
    connection = duckdb.connect(db, read_only=True)
    try:
        return connection.sql(sql).fetchall()
    finally:
        connection.close()


def _billed_and_recorded(sandbox, key: str, db: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """(units, calls) the sandbox billed this key; (units, calls) our published `api_calls` recorded."""
    billed = (sandbox.units(key), sandbox.count(key=key))
    recorded = _published(db, "SELECT coalesce(sum(units), 0)::BIGINT, count(*) FROM api_calls")[0]
    return billed, recorded


def _complete(summary: dict, vins: int) -> None:
    assert summary["status"] == "completed", summary
    for name in DATASETS.split(","):
        counts = summary["datasets"][name]
        assert counts["planned"] == vins, (name, counts)
        assert counts["found"] + counts["no_data"] == vins, (name, counts)  # every VIN answered, none lost


def _until(condition, what: str, *children: Fleet) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        for child in children:
            assert child.running(), f"{what}: a child ended first:\n{child.stderr()[-2000:]}"
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def _lock_names(db: str, pid: int) -> bool:
    try:
        return json.loads(Path(db + ".lock").read_text() or "{}").get("pid") == pid
    except (OSError, ValueError):
        return False


def test_two_refreshes_at_once_one_runs_and_the_other_is_refused_before_any_call(sandbox, fleet_file, tmp_path):
    sandbox.set_faults(SLOW)
    key, db, fleet = "sharing_two_at_once", str(tmp_path / "fleet.duckdb"), fleet_file(60)
    env = _env(sandbox, key)
    first = Fleet(tmp_path, "first", _refresh_args(fleet, db), env)
    second = Fleet(tmp_path, "second", _refresh_args(fleet, db), env)
    codes = {first.wait(), second.wait()}
    assert codes == {0, EX_TEMPFAIL}, (first.stderr()[-2000:], second.stderr()[-2000:])
    ran, refused = (first, second) if first.process.returncode == 0 else (second, first)

    # The refused one said so in one line (who holds it, since when, what to do) and printed nothing else:
    # with --json, that line is a JSON error on stdout, where the summary would have been.
    lines = refused.stdout().splitlines()
    assert len(lines) == 1, lines
    error = json.loads(lines[0])["error"]
    assert (error["code"], error["kind"]) == (EX_TEMPFAIL, "busy"), error
    assert f"pid {ran.pid}" in error["message"] and "--wait" in error["message"] and "since" in error["message"]
    assert refused.stderr() == ""

    summary = ran.summary()
    _complete(summary, 60)
    billed, recorded = _billed_and_recorded(sandbox, key, db)
    # What the service billed is one run's: the refused one called nothing.
    assert billed == recorded == (summary["units"], summary["calls"])
    assert _published(db, "SELECT count(*), min(status) FROM runs") == [(1, "completed")]


def test_status_in_a_loop_during_a_refresh_sees_it_live_and_never_harms_it(sandbox, fleet_file, tmp_path):
    sandbox.set_faults(SLOW)
    key, db, fleet = "sharing_status_loop", str(tmp_path / "fleet.duckdb"), fleet_file(60)
    refresh = Fleet(tmp_path, "refresh", _refresh_args(fleet, db), _env(sandbox, key))
    seen_live, statuses = [], 0
    try:
        for _ in range(200):
            if not refresh.running():
                break
            status = subprocess.run([sys.executable, "-m", "fleet_data.flows.cli", "status", "--db", db, "--json"], cwd=ROOT,
                                    env=_env(sandbox, key), capture_output=True, text=True, timeout=120)
            if status.returncode == 2 and "no such database" in status.stdout + status.stderr:  # --json: on stdout
                continue  # the refresh has not published its first snapshot yet
            assert status.returncode == 0, status.stderr
            statuses += 1
            live = json.loads(status.stdout)["live_run"]
            if live:
                seen_live.append(live)
                assert live["pid"] == refresh.pid and live["command"] == "refresh"
        assert refresh.wait() == 0, refresh.stderr()[-2000:]
    finally:
        refresh.stop()

    summary = refresh.summary()
    _complete(summary, 60)
    billed, recorded = _billed_and_recorded(sandbox, key, db)
    assert billed == recorded == (summary["units"], summary["calls"])
    assert seen_live, f"{statuses} status calls during the refresh, none showed it live"
    assert {live["run_id"] for live in seen_live} == {summary["run_id"]}

    after = subprocess.run([sys.executable, "-m", "fleet_data.flows.cli", "status", "--db", db, "--json"], cwd=ROOT,
                           env=_env(sandbox, key), capture_output=True, text=True, timeout=120)
    shown = json.loads(after.stdout)
    assert shown["live_run"] is None
    assert [(r["run_id"], r["status"]) for r in shown["runs"]] == [(summary["run_id"], "completed")]


READER = """
import sys, duckdb
path = sys.argv[1]
connection = duckdb.connect(path, read_only=True)
def look():
    return connection.sql("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM market_values)").fetchall()[0]
print(*look(), flush=True)
for line in sys.stdin:
    if line.strip() == "reconnect":
        connection.close()
        connection = duckdb.connect(path, read_only=True)
    print(*look(), flush=True)
"""


def test_a_reader_holding_the_database_never_blocks_the_refresh(sandbox, fleet_file, tmp_path):
    sandbox.set_faults(SLOW)
    key, db = "sharing_reader", str(tmp_path / "fleet.duckdb")
    fleet = fleet_file(60)
    env = _env(sandbox, key)
    first = Fleet(tmp_path, "first", ["refresh", fleet, "--db", db, "--lake", "", "--datasets", "specs", "--json"], env)
    assert first.wait() == 0, first.stderr()[-2000:]
    assert Path(db).is_file()

    reader = subprocess.Popen([sys.executable, "-c", READER, db], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        def look(command: str = "look") -> tuple[int, int]:
            reader.stdin.write(command + "\n")
            reader.stdin.flush()
            return tuple(int(n) for n in reader.stdout.readline().split())

        old = tuple(int(n) for n in reader.stdout.readline().split())
        assert old == (1, 0)  # one run, no valuations yet
        inode = os.stat(db).st_ino
        # Publish after every landing, so the reader's file is replaced many times under it.
        refresh = Fleet(tmp_path, "second", _refresh_args(fleet, db, "--force"),
                        _env(sandbox, key, FLEET_PUBLISH_SECONDS="0"))
        seen_while_running, fresh_mid_run = set(), set()
        try:
            for _ in range(400):
                if not refresh.running():
                    break
                seen_while_running.add(look())
                fresh_mid_run.add(_published(db, "SELECT count(*) FROM market_values")[0][0])
                time.sleep(0.05)
            assert refresh.wait() == 0, refresh.stderr()[-2000:]
        finally:
            refresh.stop()
        summary = refresh.summary()
        _complete(summary, 60)

        # The reader kept its snapshot throughout (the replaced file lives on while it is open) ...
        assert seen_while_running <= {old}
        assert look() == old
        assert os.stat(db).st_ino != inode
        # ... and sees the new data once it reconnects.
        valued = summary["datasets"]["market_value"]["found"]
        assert look("reconnect") == (2, valued)
        # Readers that connected mid-run saw snapshots published during the run, not only the last one.
        assert fresh_mid_run - {0, valued}, f"no snapshot published mid-run: {sorted(fresh_mid_run)}"
    finally:
        reader.kill()
        reader.wait(timeout=30)

    billed, recorded = _billed_and_recorded(sandbox, key, db)
    assert billed == recorded
    assert recorded[1] == first.summary()["calls"] + summary["calls"]


def test_wait_queues_behind_the_running_refresh(sandbox, fleet_file, tmp_path):
    sandbox.set_faults(SLOW)
    key, db, fleet = "sharing_wait", str(tmp_path / "fleet.duckdb"), fleet_file(40)
    env = _env(sandbox, key)
    first = Fleet(tmp_path, "first", _refresh_args(fleet, db), env)
    try:
        _until(lambda: _lock_names(db, first.pid), "the first refresh holds the lock", first)
        queued = Fleet(tmp_path, "queued", _refresh_args(fleet, db, "--wait"), env)
        _until(lambda: "waiting" in queued.stderr(), "the second one says it waits", first, queued)
        assert first.wait() == 0, first.stderr()[-2000:]
        assert queued.wait() == 0, queued.stderr()[-2000:]
    finally:
        first.stop()

    waiting = [line for line in queued.stderr().splitlines() if "waiting" in line]
    assert len(waiting) == 1 and f"pid {first.pid}" in waiting[0], queued.stderr()
    done, after = first.summary(), queued.summary()
    _complete(done, 40)
    # The queued run started once the first had finished, so everything was fresh: it called nothing.
    assert after["status"] == "completed" and after["calls"] == 0 and after["units"] == 0
    billed, recorded = _billed_and_recorded(sandbox, key, db)
    assert billed == recorded == (done["units"], done["calls"])
    started, finished = (dict(_published(db, f"SELECT run_id, {c} FROM runs")) for c in ("started_at", "finished_at"))
    assert started[after["run_id"]] >= finished[done["run_id"]]


def test_a_lock_left_by_a_dead_process_is_taken_over(sandbox, fleet_file, tmp_path):
    from fleet_data.tasks.store.database import open_database

    sandbox.set_faults(SLOW)
    key, db, fleet = "sharing_dead_lock", str(tmp_path / "fleet.duckdb"), fleet_file(20)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)  # its PID names no live process now
    with open_database(db) as store:  # what that process had written before it died
        store.start_run("refresh", [fleet], run_id="gone-run")
    Path(db + ".lock").write_text(json.dumps({"pid": gone.pid, "run_id": "gone-run", "command": "refresh",
                                              "started": "2026-01-01T00:00:00+00:00"}))

    refresh = Fleet(tmp_path, "refresh", _refresh_args(fleet, db), _env(sandbox, key))
    assert refresh.wait() == 0, refresh.stderr()[-2000:]
    said = [line for line in refresh.stderr().splitlines() if "gone-run" in line]
    assert len(said) == 1 and f"pid {gone.pid}" in said[0] and "took over" in said[0], refresh.stderr()
    summary = refresh.summary()
    _complete(summary, 20)
    assert dict(_published(db, "SELECT run_id, status FROM runs")) == {"gone-run": "interrupted",
                                                                        summary["run_id"]: "completed"}
    billed, recorded = _billed_and_recorded(sandbox, key, db)
    assert billed == recorded == (summary["units"], summary["calls"])
    assert Path(db + ".lock").read_text() == ""  # released: the next run finds nobody to take over from


# -- the same rules, in this process -------------------------------------------------------------
HOLDER = """
import sys
from fleet_data.tasks.run.context import hold_run
with hold_run(sys.argv[1], "cli-run", "refresh"):
    print("holding", flush=True)
    sys.stdin.read()  # until the test closes it
"""


def _hold_elsewhere(db: str) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, db], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "holding"
    return holder


def _waiting_for_lock(db: str, pid: int) -> bool:
    """Whether `pid` is queued on the lock (a blocked flock shows in /proc/locks with '->')."""
    inode = os.stat(db + ".lock").st_ino
    lines = Path("/proc/locks").read_text().splitlines()
    return any("->" in line and f" {pid} " in line and line.split()[-3].endswith(f":{inode}") for line in lines)


def test_a_flow_started_outside_the_cli_queues_behind_the_lock_holder(service, fleet_file, db_path):
    """As under `fleet serve` or a Prefect worker: the flow takes the lock itself, and waits for it."""
    import threading

    from fleet_data.flows.refresh import refresh_fleet
    from fleet_data.tasks.settings import RefreshOptions

    sandbox = service("sharing_flow_queues")
    holder = _hold_elsewhere(db_path)
    seen: dict[str, object] = {}

    def release_once_queued() -> None:
        deadline = time.monotonic() + DEADLINE
        while not _waiting_for_lock(db_path, os.getpid()) and time.monotonic() < deadline:
            time.sleep(0.05)
        seen["queued"], seen["calls_while_queued"] = _waiting_for_lock(db_path, os.getpid()), sandbox.count()
        holder.stdin.close()  # the holder ends its run

    watcher = threading.Thread(target=release_once_queued)
    watcher.start()
    try:
        summary = refresh_fleet([fleet_file(10)], RefreshOptions(db=db_path, lake=None, datasets=["specs"]))
    finally:
        watcher.join(timeout=DEADLINE)
        holder.kill()
        holder.wait(timeout=30)
    assert seen == {"queued": True, "calls_while_queued": 0}
    assert summary["status"] == "completed" and summary["datasets"]["specs"]["planned"] == 10
    billed, recorded = _billed_and_recorded(sandbox, "sharing_flow_queues", db_path)
    assert billed == recorded == (summary["units"], summary["calls"])


def test_backfill_is_refused_too_while_another_run_holds_the_database(tmp_path, capsys):
    from fleet_data.flows.cli import main

    db = str(tmp_path / "fleet.duckdb")
    holder = _hold_elsewhere(db)
    try:
        assert main(["backfill", "--reparse", "--db", db]) == EX_TEMPFAIL
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"run cli-run (refresh, pid {holder.pid})" in err and "--wait" in err


def test_publishing_during_a_run_follows_FLEET_PUBLISH_SECONDS(tmp_path, monkeypatch):
    import polars as pl

    from fleet_data.tasks.run.progressfile import read_progress
    from fleet_data.tasks.run.context import hold_run
    from fleet_data.tasks.store.database import open_database

    db = str(tmp_path / "fleet.duckdb")
    calls = pl.DataFrame({"call_id": ["a", "b", "c"], "endpoint": ["/specs"] * 3, "units": [1, 1, 1]})
    monkeypatch.setenv("FLEET_PUBLISH_SECONDS", "3600")
    with hold_run(db, "r1", "refresh") as session:
        run = session.context
        assert _published(db, "SELECT count(*) FROM api_calls") == [(0,)]  # a first run publishes at once
        with open_database(db) as store:
            store.land("api_calls", calls, "r1")
        assert not run.publish_if_due()  # the last publish is recent
        assert _published(db, "SELECT count(*) FROM api_calls") == [(0,)]
        run.publish_seconds = 0  # read from FLEET_PUBLISH_SECONDS when the run starts
        assert run.publish_if_due()
        assert _published(db, "SELECT count(*) FROM api_calls") == [(3,)]
        assert read_progress(db)["publishes"] == 2 and read_progress(db)["last_publish"]
        with open_database(db) as store:
            store.start_run("refresh", [], run_id="r1")
    # Leaving publishes whatever happened, and cleans up after itself.
    assert _published(db, "SELECT run_id FROM runs") == [("r1",)]
    assert read_progress(db) is None and Path(db + ".lock").read_text() == ""
    assert not Path(db + ".publishing").exists()


OLD_WRITER = """
import os, sys
import polars as pl
from fleet_data.tasks.store.database import Database
db = Database(sys.argv[1])  # as before the working store: writing --db itself
db.land("api_calls", pl.DataFrame({"call_id": ["old-1", "old-2"], "endpoint": ["/specs"] * 2}), "old-run")
os._exit(0)  # killed: the landing is only in the write-ahead log beside the file
"""


def test_a_database_from_before_the_working_store_seeds_it(tmp_path):
    from fleet_data.tasks.run.context import hold_run
    from fleet_data.tasks.store.database import open_database

    db = str(tmp_path / "fleet.duckdb")
    subprocess.run([sys.executable, "-c", OLD_WRITER, db], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                   check=True, timeout=60)
    assert Path(db + ".wal").exists() and not Path(db + ".working").exists()
    published = Path(db).read_bytes()
    with hold_run(db, "new-run", "refresh"):
        with open_database(db) as store:  # the first run starts from what the old file held, log included
            assert store.sql("SELECT call_id FROM api_calls ORDER BY 1").rows() == [("old-1",), ("old-2",)]
        assert Path(db).read_bytes() == published  # not written: published at the end only
    assert not Path(db + ".wal").exists()  # its old log would be replayed into the new snapshot
    assert _published(db, "SELECT count(*) FROM api_calls") == [(2,)]


def test_only_the_lock_holder_clears_other_runs_staging(tmp_path):
    from fleet_data.tasks.run.context import current, hold_run
    from fleet_data.tasks.staging.area import StagingArea

    db = str(tmp_path / "fleet.duckdb")
    other = StagingArea.beside(db, "other-run").run_dir
    other.mkdir(parents=True)
    with pytest.raises(RuntimeError, match="holds no database"):  # the staging area is the run context's
        current("mine")
    assert other.is_dir()  # maybe a live run's: left alone
    with hold_run(db, "mine", "refresh") as session:
        assert session.context.staging.remove_leftovers() == [other] and not other.exists()


def test_the_lock_is_reentrant_in_its_process_and_exclusive_across_processes(tmp_path):
    from fleet_data.tasks.run import lock as runlock

    db = str(tmp_path / "fleet.duckdb")
    assert runlock.acquire(db, "r1", "refresh") is True
    assert runlock.acquire(db, "r1", "refresh") is False  # the flow inside the command: a no-op hold
    probe = ("import sys; from tasks.run import lock as runlock\n"
             "try:\n    runlock.acquire(sys.argv[1], 'r2', 'backfill')\nexcept runlock.RunLocked as exc:\n    print(exc)")
    other = subprocess.run([sys.executable, "-c", probe, db], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                           capture_output=True, text=True, timeout=60)
    assert f"in use by run r1 (refresh, pid {os.getpid()})" in other.stdout
    runlock.release(db)
    assert runlock.held_here(db) is not None  # one hold left
    runlock.release(db)
    assert runlock.held_here(db) is None and runlock.read_holder(db) is None
