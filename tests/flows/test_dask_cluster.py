"""`fleet refresh --dask` against a real Dask cluster (issue 20), every process from the installed wheel.

`dask scheduler` and `dask worker` (two worker processes) run from a venv holding only the wheel with its
`dask` and `s3` extras and what pip resolved for them (tests/wheel_venv.py, on the packaging test's venv),
with no PYTHONPATH, no VDS_* and no AWS_* variables, in a home of their own. `fleet refresh --dask ...
--staging s3://...` runs from the same venv against `fleet sandbox` and moto's S3 server, on Prefect's
temporary server. The service, the key and the S3 credentials reach the workers only from the flow; the
workers report to the flow's Prefect server and start none of their own.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.wheel_venv import installed_sandbox, session_work_dir, wheel_venv
from .conftest import sample_rows

psutil = pytest.importorskip("psutil")
# The venv builds are most of it: the base venv (~120 packages), then its `dask` and `s3` extras layered on it
# (tests/wheel_venv.py); on 2 busy cores, 6 and 4 minutes. A bound that says "it did not hang", not a timing.
pytestmark = pytest.mark.timeout(1800)

KEY = "dask_cluster_key_5d21f0"  # distinctive, so a leak is easy to find
AWS_SECRET = "dask-cluster-aws-secret-8e4b19"
AWS_KEY_ID = "dask-cluster-key-id"
BUCKET, STAGING = "fleet-dask", "s3://fleet-dask/runs"
VINS, CHUNK, DATASETS = 30, 10, ("specs", "market_value")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _clean_env(home: Path) -> dict[str, str]:
    """What a freshly logged-in machine has: no VDS_*, AWS_*, PREFECT_* or PYTHONPATH; a home of its own."""
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", "DO_NOT_TRACK": "1",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "TMPDIR": str(home)}


def _stop(process: subprocess.Popen, timeout: float = 60) -> None:
    """SIGTERM by PID, then wait (SIGKILL only if it would not go: the assertion on leftovers still runs)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


class Descendants:
    """Every process ever seen under `roots`, sampled until stopped: (pid, start time) -> command line."""

    def __init__(self, roots: list[int]):
        self.roots, self.seen, self._stop = roots, {}, threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(0.2)

    def sample(self) -> None:
        for root in self.roots:
            with contextlib.suppress(psutil.Error):
                for child in psutil.Process(root).children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        self.seen[(child.pid, child.create_time())] = " ".join(child.cmdline())

    def __enter__(self) -> "Descendants":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def alive(self) -> list[str]:
        left = []
        for (pid, started), command in self.seen.items():
            with contextlib.suppress(psutil.Error):
                if psutil.Process(pid).create_time() == started:
                    left.append(f"{pid}: {command}")
        return left


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory) -> Path:
    # The wheel with its `dask` and `s3` extras, layered on the packaging test's venv: built once per run.
    return wheel_venv(session_work_dir(tmp_path_factory), extras=("dask", "s3"))


@pytest.fixture(scope="module")
def s3() -> Iterator[tuple[str, object]]:
    """moto's S3 server on loopback (from the dev venv, as tests/flows/test_fetch_anywhere.py starts it)."""
    boto3 = pytest.importorskip("boto3")
    port = _free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        client = boto3.client("s3", endpoint_url=url, aws_access_key_id=AWS_KEY_ID, aws_secret_access_key=AWS_SECRET,
                              region_name="us-east-1")
        for _ in range(150):  # up to 15 s for the server to listen
            try:
                client.create_bucket(Bucket=BUCKET)
                break
            except Exception:
                time.sleep(0.1)
        yield url, client
    finally:
        _stop(server, timeout=10)


@pytest.fixture(scope="module")
def sandbox(bin_dir, tmp_path_factory) -> Iterator[object]:
    """`fleet sandbox` from the wheel, recording every call; a handle on its admin routes."""
    from fleet_data.connectors.sandbox.runner import Sandbox

    home = tmp_path_factory.mktemp("sandbox")
    with installed_sandbox(bin_dir / "fleet", home, _clean_env(home), "--journal") as url:
        handle = Sandbox(url)
        yield handle
        handle._admin.close()


@pytest.fixture(scope="module")
def cluster(bin_dir, tmp_path_factory) -> Iterator[dict]:
    """`dask scheduler` and `dask worker --nworkers 2` on loopback, from the wheel's venv, in a clean environment."""
    folder = tmp_path_factory.mktemp("cluster")
    env = _clean_env(folder / "home")
    scheduler_file = folder / "scheduler.json"
    logs = {name: (folder / f"{name}.log").open("w") for name in ("scheduler", "worker")}
    scheduler = subprocess.Popen([str(bin_dir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                                  "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(scheduler_file)],
                                 cwd=folder, env=env, stdout=logs["scheduler"], stderr=subprocess.STDOUT)
    worker = None
    try:
        deadline = time.monotonic() + 120
        while not scheduler_file.exists() or not scheduler_file.read_text().strip():
            assert scheduler.poll() is None and time.monotonic() < deadline, (folder / "scheduler.log").read_text()
            time.sleep(0.2)
        time.sleep(0.2)  # the file is written at once, but give it a moment to be whole
        address = json.loads(scheduler_file.read_text())["address"]
        worker = subprocess.Popen([str(bin_dir / "dask"), "worker", "--scheduler-file", str(scheduler_file),
                                   "--nworkers", "2", "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard"],
                                  cwd=folder, env=env, stdout=logs["worker"], stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while (folder / "worker.log").read_text().count("Registered to:") < 2:
            assert worker.poll() is None and time.monotonic() < deadline, (folder / "worker.log").read_text()[-3000:]
            time.sleep(0.2)
        yield {"address": address, "scheduler": scheduler, "worker": worker, "folder": folder, "home": folder / "home"}
    finally:
        for process in (worker, scheduler):
            if process is not None:
                _stop(process)
        for log in logs.values():
            log.close()


@pytest.fixture(scope="module")
def refreshed(bin_dir, cluster, sandbox, s3, tmp_path_factory) -> dict:
    """One `fleet refresh --dask --staging s3://` run, watched from outside; then the cluster is stopped."""
    folder = tmp_path_factory.mktemp("refresh")
    sample_rows(VINS).write_csv(folder / "fleet.csv")
    env = _clean_env(folder / "home") | {
        "VDS_API_KEY": KEY, "VDS_BASE_URL": sandbox.url, "PREFECT_HOME": str(folder / "prefect"),
        # A Prefect server of its own, which ends with the command (the shared one would outlive the test).
        "FLEET_PREFECT_SERVER": "temporary",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "150", "AWS_ENDPOINT_URL": s3[0],
        "AWS_ACCESS_KEY_ID": AWS_KEY_ID, "AWS_SECRET_ACCESS_KEY": AWS_SECRET, "AWS_DEFAULT_REGION": "us-east-1"}
    roots = [cluster["scheduler"].pid, cluster["worker"].pid]
    worker_pids = {p.pid for p in psutil.Process(cluster["worker"].pid).children()}
    with Descendants(roots) as seen:
        done = subprocess.run([str(bin_dir / "fleet"), "refresh", "fleet.csv", "--db", "fleet.duckdb", "--lake", "",
                               "--datasets", ",".join(DATASETS), "--chunk-size", str(CHUNK), "--dask", cluster["address"],
                               "--staging", STAGING, "--json"],
                              cwd=folder, env=env, capture_output=True, text=True, timeout=600)
        seen.sample()
    during = dict(seen.seen)
    for process in (cluster["worker"], cluster["scheduler"]):  # SIGTERM by PID, then wait
        _stop(process)
    deadline = time.monotonic() + 30  # what they started goes with them (multiprocessing's resource tracker in a moment)
    while seen.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    return {"done": done, "folder": folder, "during": during, "left": seen.alive(), "worker_pids": worker_pids,
            "logs": "".join((cluster["folder"] / f"{n}.log").read_text() for n in ("scheduler", "worker"))}


def test_a_refresh_on_a_dask_cluster_lands_every_answer_once_and_bills_what_it_records(refreshed, sandbox, s3):
    done, folder = refreshed["done"], refreshed["folder"]
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["status"] == "completed"
    assert summary["fetched_in"] and set(summary["fetched_in"]) <= refreshed["worker_pids"]  # the cluster fetched

    with duckdb.connect(str(folder / "fleet.duckdb"), read_only=True) as con:
        rows = lambda sql: con.execute(sql).fetchall()  # noqa: E731
        vins = {v for (v,) in rows("SELECT vin FROM vehicles")}
        statuses = rows("SELECT dataset, vin, outcome FROM fetch_status")
        specs = {v for (v,) in rows("SELECT vin FROM specs WHERE make IS NOT NULL")}
        valued = {v for (v,) in rows("SELECT vin FROM market_values")}
        recorded = rows("SELECT endpoint, vin, status, units FROM api_calls")
    assert len(vins) == VINS
    for dataset in DATASETS:  # every VIN answered, once, per dataset
        answered = [v for d, v, _ in statuses if d == dataset]
        assert sorted(answered) == sorted(vins)
    assert specs == {v for d, v, s in statuses if d == "specs" and s == "found"}
    assert valued == {v for d, v, s in statuses if d == "market_value" and s == "found"}
    assert specs and valued

    # The sandbox's own record is the referee: each VIN paid for once per endpoint, and what it billed is
    # what api_calls says (calls, statuses, units).
    called = [c for c in sandbox.journal() if c["key"] == KEY]
    # The key check's free call (connectors/keycheck.py), once the cluster was found working, about no VIN (the
    # sandbox's journal says "", the ledger NULL): in the ledger too.
    assert [(c["endpoint"], c["status"]) for c in called if not c["vin"]] == [("/specs", 400)]
    assert Counter((c["endpoint"], c["vin"] or None, c["status"]) for c in called) == Counter(
        (e, v, s) for e, v, s, _ in recorded)
    billed = [c for c in called if c["vin"]]
    assert len({(c["endpoint"], c["vin"]) for c in billed}) == len(billed) == 2 * VINS
    assert sandbox.units(KEY) == sum(u for *_, u in recorded) > 0
    assert s3[1].list_objects_v2(Bucket=BUCKET).get("KeyCount", 0) == 0  # every staged file landed, then deleted


def test_the_key_and_the_storage_secret_never_leave_the_flow_in_clear(refreshed):
    done, folder = refreshed["done"], refreshed["folder"]
    prefect_db = folder / "prefect" / "prefect.db"
    assert prefect_db.exists()
    with sqlite3.connect(prefect_db) as con:
        runs = con.execute("SELECT name, state_type FROM task_run WHERE name LIKE 'specs %' "
                           "OR name LIKE 'market_value %'").fetchall()
        logged = [m for (m,) in con.execute("SELECT message FROM log")]
    # The workers reported their task runs (and their logs) to the flow's Prefect server.
    assert len(runs) == len(DATASETS) * VINS // CHUNK and {s for _, s in runs} == {"COMPLETED"}
    assert any(m.startswith("specs ") and "found=" in m for m in logged)
    stored = b"".join(p.read_bytes() for p in (folder / "prefect").glob("prefect.db*"))  # the WAL too
    for secret in (KEY, AWS_SECRET):
        assert secret.encode() not in stored  # task runs, their inputs, logs, events, artifacts
        assert secret not in refreshed["logs"]  # the scheduler's and the workers' output
        assert secret not in done.stdout + done.stderr


def test_workers_start_no_prefect_server_and_leave_no_process_behind(refreshed, cluster):
    servers = [c for c in refreshed["during"].values() if "uvicorn" in c or "prefect" in c and "server" in c]
    assert not servers, servers
    assert refreshed["during"]  # the watch saw the worker processes themselves
    assert not list(cluster["home"].rglob("prefect.db"))  # no temporary server's database either
    assert not refreshed["left"], refreshed["left"]  # SIGTERM to the workers and scheduler stopped all they started
    assert cluster["worker"].returncode is not None and cluster["scheduler"].returncode is not None


def test_an_unreachable_scheduler_is_refused_in_one_line_before_any_call(bin_dir, sandbox, tmp_path):
    sample_rows(4).write_csv(tmp_path / "fleet.csv")
    env = _clean_env(tmp_path / "home") | {"VDS_API_KEY": KEY + "-unreachable", "VDS_BASE_URL": sandbox.url}
    done = subprocess.run([str(bin_dir / "fleet"), "refresh", "fleet.csv", "--db", "fleet.duckdb", "--lake", "",
                           "--datasets", "specs", "--dask", f"tcp://127.0.0.1:{_free_port()}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: --dask tcp://127.0.0.1:") and len(done.stderr.strip().splitlines()) == 1
    assert "no Dask scheduler answers there" in done.stderr and "bug" not in done.stderr
    assert sandbox.count(key=KEY + "-unreachable") == 0


def test_what_reaches_a_fetch_task_shows_no_secret():
    """The fetch task's parameter, however Prefect or Dask print it (repr, str, JSON): secrets are masked."""
    from fleet_data.connectors import ServiceAccess, Settings
    from fleet_data.tasks.staging.area import StorageAccess
    from fleet_data.tasks.steps.refresh_tasks import FetchAccess

    access = FetchAccess(staging=STAGING, service=ServiceAccess.of(Settings(api_key=KEY, base_url="http://127.0.0.1:9")),
                         storage=StorageAccess(key=AWS_KEY_ID, secret=AWS_SECRET), retry_window=60)
    for shown in (repr(access), str(access), access.model_dump_json(), json.dumps(access.model_dump(mode="json"))):
        assert KEY not in shown and AWS_SECRET not in shown
    assert access.service.settings().api_key == KEY  # where the client is built, the key is whole
    assert access.storage is not None and access.storage.storage_options()["secret"] == AWS_SECRET


def test_a_cluster_that_cannot_fetch_is_refused_with_the_reason():
    """No workers; a worker that cannot reach the flow's Prefect API, or the staging bucket with the flow's
    credentials (here closed ports): one line each."""
    distributed = pytest.importorskip("distributed")
    from fleet_data.connectors import ServiceAccess
    from fleet_data.flows.fetchers import ClusterError, check_cluster
    from fleet_data.tasks.staging.area import StorageAccess
    from fleet_data.tasks.steps.refresh_tasks import FetchAccess

    closed = f"http://127.0.0.1:{_free_port()}"
    no_storage = FetchAccess(staging=STAGING, service=ServiceAccess(), storage=StorageAccess(
        endpoint_url=closed, region="us-east-1", key=AWS_KEY_ID, secret=AWS_SECRET))
    cases = ((0, None, None, "the cluster has no workers"),
             (1, f"{closed}/api", None, f"cannot reach the flow's Prefect API at {closed}/api"),
             (1, None, no_storage, "cannot fetch (EndpointConnectionError: Could not connect to the endpoint URL"))
    for workers, api_url, access, reason in cases:
        with distributed.LocalCluster(n_workers=workers, processes=False, dashboard_address=None) as local, \
                distributed.Client(local, set_as_default=False) as client:
            with pytest.raises(ClusterError) as refused:
                check_cluster(client, local.scheduler_address, api_url, access)
        message = str(refused.value)
        assert reason in message and "\n" not in message and AWS_SECRET not in message
