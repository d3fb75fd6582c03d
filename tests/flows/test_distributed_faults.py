"""A service the run depends on, lost mid-run, is an environment fault: one line, exit code 9, the run recorded
`failed` with the reason, and nothing paid is bought twice (issue 28).

Each test runs the real `fleet refresh` in its own process against the sandbox in another, which bills per
key and is the referee: after the fault and a second run, the ledger holds every unit the service billed, and
no VIN was bought twice for a dataset.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from fleet_data.connectors.sandbox import Sandbox
from fleet_data.tasks.exitcodes import SERVICE_LOST
from fleet_data.tasks.store.database import open_database

from tests.object_store import moto_s3
from tests.tcp_relay import TcpRelay, free_port

from .conftest import sample_rows

ROOT = Path(__file__).resolve().parents[2]
KEY = "distributed_faults_key"
BOUND = 300  # seconds: a hang guard for a loaded box, not a timing
pytestmark = [pytest.mark.usefixtures("prefect_server"), pytest.mark.timeout(3 * BOUND)]


def _overload() -> float:
    """How far the machine is past its cores (1-minute load average over cores), at least 1: stretches a bound."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


@pytest.fixture
def billing_sandbox():
    sandbox = Sandbox.start_subprocess(["--latency-ms", "20", "--journal"])  # its own process: the referee
    yield sandbox
    sandbox.stop()


def _paid(sandbox: Sandbox) -> Counter:
    return Counter((c["endpoint"], c["vin"]) for c in sandbox.journal() if c["key"] == KEY and c["status"] == 200)


def _rows(db: str, sql: str) -> list[tuple]:
    with open_database(db) as store:
        return store.sql(sql).rows()


@contextlib.contextmanager
def _command_running(command: list[str], **popen: Any) -> Iterator[subprocess.Popen]:
    """`command` in a session of its own, its output piped; whatever of it is left at the block's end (a test
    that failed on a run that hung) is killed, so no run outlives its test."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True, **popen)
    try:
        yield child
    finally:
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.communicate(timeout=30)


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error: ")]


@pytest.fixture
def object_store():
    """moto's S3 server, reached through a relay the test can stop (the endpoint then refuses connections) and start
    again: the bucket keeps what was put in it meanwhile, as S3 would."""
    pytest.importorskip("moto")
    pytest.importorskip("boto3")
    with moto_s3() as (port, client), TcpRelay(("127.0.0.1", port)) as relay:
        yield relay, client


def test_the_object_store_lost_mid_run_ends_in_one_line_and_the_next_run_buys_only_what_was_never_answered(
        billing_sandbox, object_store, tmp_path):
    from prefect.settings import PREFECT_API_URL

    relay, bucket = object_store
    fleet = tmp_path / "fleet.csv"
    sample_rows(240).write_csv(fleet)
    db = str(tmp_path / "fleet.duckdb")
    env = {**os.environ, "VDS_BASE_URL": billing_sandbox.url, "VDS_API_KEY": KEY, "PYTHONPATH": str(ROOT),
           "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_LOGGING_TO_API_ENABLED": "false",
           "AWS_ENDPOINT_URL": relay.url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "TMPDIR": str(tmp_path)}  # its scratch folder: this test's own
    command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fleet), "--db", db, "--lake", "",
               "--datasets", "specs,market_value", "--chunk-size", "20", "--workers", "2",
               "--staging", "s3://fleet-staging/runs"]
    with _command_running(command, cwd=tmp_path, env=env) as child:
        deadline = time.monotonic() + BOUND
        while billing_sandbox.units(KEY) < 60:  # some chunks staged in the bucket, some answers still coming
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the refresh never reached its calls"
            time.sleep(0.05)
        relay.stop()
        lost_at = time.monotonic()
        out, err = child.communicate(timeout=BOUND)
    ended_after = time.monotonic() - lost_at
    print(f"ended {ended_after:.1f} s after the object store was lost")

    assert child.returncode == SERVICE_LOST, err[-3000:]
    (line,) = _error_lines(err)
    assert "the object store of s3://fleet-staging stopped answering" in line and relay.url in line, line
    assert "Traceback" not in err and "this is a bug" not in err, err[-3000:]
    assert ended_after < 60 * _overload()  # a hang guard stretched on a loaded box: the 60 s when quiet
    (status, message), = _rows(db, "SELECT status, message FROM runs")
    assert status == "failed" and message == line.removeprefix("error: ")
    # Every planned VIN is accounted for in the run's figures: answered, or pending (a chunk lost or never started).
    assert _rows(db, "SELECT dataset FROM run_datasets WHERE planned != found + no_data + failed + pending") == []
    billed_at_the_loss = billing_sandbox.units(KEY)

    relay.start()
    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=BOUND)
    assert again.returncode == 0, again.stderr[-3000:]

    (recorded,), = _rows(db, "SELECT sum(units) FROM api_calls")
    billed = billing_sandbox.units(KEY)
    print(f"billed {billed_at_the_loss} before the loss, {billed} in all; the ledger says {recorded}")
    assert recorded == billed  # every unit paid reached the ledger, under the run that paid it
    assert max(_paid(billing_sandbox).values()) == 1  # nothing answered was bought again
    assert _rows(db, "SELECT count(DISTINCT vin) FROM api_calls WHERE endpoint = '/specs'") == [(240,)]
    assert bucket.list_objects_v2(Bucket="fleet-staging").get("KeyCount", 0) == 0  # every staged file landed
    assert not list((tmp_path / "fleet-staging").rglob("*.arrows"))  # and every scratch journal


@contextlib.contextmanager
def _temporary_prefect(home: Path) -> Iterator[tuple[dict[str, str], Callable[[subprocess.Popen], str]]]:
    """No PREFECT_API_URL: the command starts Prefect's temporary server, its own child. Killed as the machine's
    OOM killer would (SIGKILL); the API's URL is the one the child's command line names."""

    def kill(child: subprocess.Popen) -> str:
        (server,) = [p for p in psutil.Process(child.pid).children() if "uvicorn" in p.cmdline()]
        port = server.cmdline()[server.cmdline().index("--port") + 1]
        server.kill()
        return f"Prefect's temporary server at http://127.0.0.1:{port}/api"

    yield {"PREFECT_HOME": str(home)}, kill


@contextlib.contextmanager
def _standing_prefect(home: Path) -> Iterator[tuple[dict[str, str], Callable[[subprocess.Popen], str]]]:
    """A Prefect server of its own (`prefect server start`) the command reports to, killed with its children."""
    from tests.prefect_server import prefect_server_process, stop_group

    with prefect_server_process(home) as (server_env, server):
        def kill(child: subprocess.Popen) -> str:
            stop_group(server)
            return f"the Prefect API at {server_env['PREFECT_API_URL']}"

        yield server_env, kill


@pytest.mark.parametrize("prefect", [_standing_prefect, _temporary_prefect], ids=["standing", "temporary"])
def test_the_prefect_server_killed_mid_run_ends_in_one_line_and_the_next_run_buys_only_what_was_never_answered(
        prefect, tmp_path):
    from prefect.settings import PREFECT_API_URL

    fleet = tmp_path / "fleet.csv"
    sample_rows(120).write_csv(fleet)
    db = str(tmp_path / "fleet.duckdb")
    command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fleet), "--db", db, "--lake", "",
               "--datasets", "specs,market_value", "--chunk-size", "10", "--concurrency", "2"]
    sandbox = Sandbox.start_subprocess(["--latency-ms", "400", "--journal"])  # about a minute of calls
    try:
        base = {**{k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}, "VDS_BASE_URL": sandbox.url,
                "VDS_API_KEY": KEY, "PYTHONPATH": str(ROOT)}
        (tmp_path / "prefect").mkdir()
        with prefect(tmp_path / "prefect") as (server_env, kill), \
                _command_running(command, cwd=tmp_path, env={**base, **server_env}) as child:
            deadline = time.monotonic() + BOUND
            while sandbox.units(KEY) < 20:
                assert child.poll() is None, child.communicate()
                assert time.monotonic() < deadline, "the refresh never reached its calls"
                time.sleep(0.05)
            api = kill(child)  # the server (and its children), gone mid-run
            lost_at = time.monotonic()
            out, err = child.communicate(timeout=BOUND)
        ended_after = time.monotonic() - lost_at
        print(f"ended {ended_after:.1f} s after the Prefect server was killed; billed {sandbox.units(KEY)} by then")

        assert child.returncode == SERVICE_LOST, err[-3000:]
        (line,) = _error_lines(err)
        assert f"{api} stopped answering during the run" in line, line
        assert "Traceback" not in err and "this is a bug" not in err and "failed to process item" not in err, err[-3000:]
        assert ended_after < 60 * _overload()  # a hang guard stretched on a loaded box: the 60 s when quiet
        (status, message), = _rows(db, "SELECT status, message FROM runs")
        assert status == "failed" and message == line.removeprefix("error: ")
        assert _rows(db, "SELECT count(*) > 0 FROM left_pending") == [(True,)]  # what it did not ask is due again

        again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=BOUND,
                               env={**base, "PREFECT_API_URL": PREFECT_API_URL.value()})
        assert again.returncode == 0, again.stderr[-3000:]
        (recorded,), = _rows(db, "SELECT sum(units) FROM api_calls")
        assert recorded == sandbox.units(KEY)  # every unit paid reached the ledger
        assert max(_paid(sandbox).values()) == 1  # nothing answered was bought again
    finally:
        sandbox.stop()


@pytest.fixture
def dask_cluster(tmp_path):
    """A real `dask scheduler` and two `dask worker` processes of this Python, each in its own session (killed by
    the test as a machine would lose them); whatever is left is stopped afterwards."""
    pytest.importorskip("distributed")
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = str(Path(sys.executable).parent / "dask")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started: dict[str, subprocess.Popen] = {}

    def start(name: str, *command: str) -> None:
        (scratch := tmp_path / f"{name}-tmp").mkdir()  # its own $TMPDIR, as its own machine would have
        with (tmp_path / f"{name}.log").open("wb") as log:
            started[name] = subprocess.Popen([dask, *command], env={**env, "TMPDIR": str(scratch)}, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True)

    start("scheduler", "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard")
    for n in (1, 2):
        start(f"worker{n}", "worker", address, "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1")
    try:
        import distributed

        with distributed.Client(address, timeout=120) as client:
            client.wait_for_workers(2, timeout=BOUND)
        yield address, started
    finally:
        for process in started.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def _refresh_on_dask(sandbox: Sandbox, fleet: Path, db: str, address: str, *options: str,
                     env: dict[str, str] | None = None) -> subprocess.Popen:
    """`fleet refresh` of `fleet` into `db` with its fetch tasks on the Dask cluster at `address`, in its own process."""
    from prefect.settings import PREFECT_API_URL

    environment = {**os.environ, "VDS_BASE_URL": sandbox.url, "VDS_API_KEY": KEY, "PYTHONPATH": str(ROOT),
                   "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_LOGGING_TO_API_ENABLED": "false", **(env or {})}
    command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fleet), "--db", db, "--lake", "",
               *options, "--dask", address]
    return subprocess.Popen(command, cwd=fleet.parent, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@pytest.mark.parametrize("lost", ["scheduler", "every worker"])
def test_a_dask_cluster_lost_mid_run_ends_in_one_line_with_the_run_recorded(lost, dask_cluster, tmp_path):

    address, processes = dask_cluster
    fleet = tmp_path / "fleet.csv"
    sample_rows(120).write_csv(fleet)
    db = str(tmp_path / "fleet.duckdb")
    sandbox = Sandbox.start_subprocess(["--latency-ms", "300"])  # long enough to be mid-run at the loss
    try:
        child = _refresh_on_dask(sandbox, fleet, db, address, "--datasets", "specs", "--chunk-size", "10",
                                 "--concurrency", "2")
        deadline = time.monotonic() + BOUND
        while sandbox.units(KEY) < 15:
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the refresh never reached its calls"
            time.sleep(0.05)
        for name in ["scheduler"] if lost == "scheduler" else ["worker1", "worker2"]:
            os.killpg(processes[name].pid, signal.SIGKILL)
        lost_at = time.monotonic()
        out, err = child.communicate(timeout=BOUND)
        ended_after = time.monotonic() - lost_at
        print(f"ended {ended_after:.1f} s after losing the {lost}")
    finally:
        sandbox.stop()

    assert child.returncode == SERVICE_LOST, err[-3000:]
    (line,) = _error_lines(err)
    said = (f"the Dask scheduler at {address} stopped answering" if lost == "scheduler"
            else f"every worker of the Dask cluster at {address} is gone")
    assert said in line, line
    assert "Traceback" not in err and "this is a bug" not in err, err[-3000:]
    assert ended_after < 60 * _overload()  # a hang guard stretched on a loaded box: the 60 s when quiet
    (status, message), = _rows(db, "SELECT status, message FROM runs")
    assert status == "failed" and message == line.removeprefix("error: ")


def _holder(path: Path) -> int | None:
    """The process that has `path` open (a fetch task's journal: the worker writing it), if any."""
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        try:
            if os.readlink(fd) == str(path):
                return int(fd.parts[2])
        except OSError:
            continue
    return None


@pytest.mark.parametrize("staging", ["folder", "s3"])
def test_a_dask_worker_killed_mid_chunk_buys_nothing_twice_and_its_calls_reach_the_ledger(staging, dask_cluster,
                                                                                         request, tmp_path):
    """Dask runs a lost worker's task again on another worker. The re-run finds the lost attempt's journal in the shared
    staging folder, or its copy on object storage (each worker has its own disk): what it was answered is not asked
    again, and lands in this run; what it sent and never heard back, and what the copy may not show yet, is in the
    ledger as `unknown` (it may have been billed), and is asked again."""

    from fleet_data.tasks.staging.journal import read_journal

    address, processes = dask_cluster
    journals = tmp_path / "staging"  # where the workers journal: the shared folder, else each its own scratch folder
    options: list[str] = []
    aws: dict[str, str] = {}
    if staging == "s3":
        relay, bucket = request.getfixturevalue("object_store")
        journals, options = tmp_path, ["--staging", "s3://fleet-staging/runs"]
        aws = {"AWS_ENDPOINT_URL": relay.url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1"}
    fleet = tmp_path / "fleet.csv"
    sample_rows(120).write_csv(fleet)
    db = str(tmp_path / "fleet.duckdb")
    sandbox = Sandbox.start_subprocess(["--latency-ms", "300", "--journal"])  # a chunk of 20 takes 3 s: mid-chunk
    try:
        refresh = ["--datasets", "specs", "--chunk-size", "20", "--concurrency", "2", *options]
        child = _refresh_on_dask(sandbox, fleet, db, address, *refresh, env=aws)
        deadline, victim = time.monotonic() + BOUND, None
        while victim is None:  # a journal with answers in it, still open in the worker fetching its chunk
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "no chunk was ever caught mid-fetch"
            for journal in journals.glob("**/answers/*.arrows"):
                if len(read_journal(journal).final_answers()) >= 3 and (pid := _holder(journal)) is not None:
                    victim = next((name for name, p in processes.items() if p.pid == os.getpgid(pid)), None)
                    break
            time.sleep(0.05)
        os.killpg(processes[victim].pid, signal.SIGKILL)
        other = lambda name: "worker2" if name == "worker1" else "worker1"  # noqa: E731  # the worker and its nanny, as a machine lost
        out, err = child.communicate(timeout=BOUND)
        assert child.returncode == 0, err[-3000:]

        billed, paid = sandbox.units(KEY), _paid(sandbox)
        (recorded, unknown), = _rows(db, "SELECT sum(units), coalesce(sum(units) FILTER (billing = 'unknown'), 0) "
                                         "FROM api_calls")
        print(f"billed {billed}; the ledger says {recorded}, {unknown} of it unknown")
        assert billed <= recorded <= billed + unknown  # every unit billed is in the ledger, in this run already
        maybe_paid = {(e, v) for e, v in _rows(db, "SELECT endpoint, vin FROM api_calls WHERE billing = 'unknown'")}
        twice = {call for call, n in paid.items() if n > 1}
        assert twice <= maybe_paid  # only a call the lost worker sent and never heard back from was asked again
        assert _rows(db, "SELECT planned, found + no_data + failed FROM run_datasets") == [(120, 120)]  # all answered
        if staging == "s3":  # every staged file and copy landed; the lost worker's own journal stays on its disk
            assert bucket.list_objects_v2(Bucket="fleet-staging").get("KeyCount", 0) == 0
            assert not list((tmp_path / f"{other(victim)}-tmp").rglob("*.arrows"))
        else:
            assert not list(journals.rglob("*.arrows"))  # the lost attempt's journal landed in this run

        again = _refresh_on_dask(sandbox, fleet, db, address, *refresh, env=aws)
        _, again_err = again.communicate(timeout=BOUND)
        assert again.returncode == 0, again_err[-3000:]
        assert sandbox.units(KEY) == billed  # the next run has nothing left to buy
    finally:
        sandbox.stop()


def _running(dask_worker) -> int:
    """Run on each Dask worker: the tasks its threads still run (one whose future was released runs on, unseen by the
    scheduler, until it returns)."""
    return len(dask_worker.active_threads)


def test_a_stop_signal_ends_a_dask_run_within_seconds_while_its_chunks_sit_out_a_retry_after(dask_cluster, tmp_path):
    """SIGTERM with `--dask` while the workers' chunks wait out the spec's full Retry-After (60 s): the command ends,
    recorded `cancelled`, within seconds, and so do its chunks on the cluster: no call starts after the stop, not a
    minute later when their retries were due (docs/stopping.md)."""
    import distributed

    from fleet_data.tasks.exitcodes import CANCELLED

    address, _ = dask_cluster
    fleet = tmp_path / "fleet.csv"
    sample_rows(200).write_csv(fleet)
    db = str(tmp_path / "fleet.duckdb")
    sandbox = Sandbox.start_subprocess(["--fault-rate", "0.3", "--fault-statuses", "502,503,504", "--latency-ms", "20",
                                        "--journal"])
    try:
        child = _refresh_on_dask(sandbox, fleet, db, address, "--datasets", "specs,market_value", "--chunk-size", "50",
                                 "--concurrency", "4")
        deadline = time.monotonic() + BOUND
        while sum(c["key"] == KEY and c["status"] != 200 for c in sandbox.journal()) < 5:  # retries are waiting
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the refresh never reached its calls"
            time.sleep(0.1)
        child.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        out, err = child.communicate(timeout=BOUND)
        ended_after = time.monotonic() - stopped_at
        print(f"ended {ended_after:.1f} s after SIGTERM")
        with distributed.Client(address, timeout=60) as client:  # the chunks on the cluster stopped too: no more calls
            while busy := {w: n for w, n in client.run(_running).items() if n}:
                assert time.monotonic() - stopped_at < 10 * _overload(), f"still fetching on the cluster: {busy}"
                time.sleep(0.25)
    finally:
        sandbox.stop()
    assert child.returncode == CANCELLED, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert ended_after < 10 * _overload()  # docs/stopping.md's 10 s, stretched on a loaded box; a Retry-After is 60
    (status,), = _rows(db, "SELECT status FROM runs")
    assert status == "cancelled"
