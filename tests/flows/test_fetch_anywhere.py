"""Fetch anywhere (issue 13): fetch tasks in worker processes, on a Dask cluster, staged on S3.

A fetch task takes a slice of the due list and writes a staged file; the flow lands each file in its
own process. Each test is one or two flow runs against the sandbox over loopback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import signal
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fleet_data.connectors import CallRecord
from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import RefreshOptions
from fleet_data.tasks.staging.journal import AnswerJournal, Journal, read_journal

from tests.object_store import moto_s3

pytestmark = pytest.mark.usefixtures("prefect_server")
ROOT = Path(__file__).resolve().parents[2]

DATASETS = ["specs", "market_value"]


def _rows(read, db: str) -> dict[str, list[tuple]]:
    """What landed, without what differs between two runs by design (run ids and times)."""
    tables = {}
    for table in ("specs", "market_values", "api_calls"):
        columns = [c for (c, kind, *_) in read(db, f"DESCRIBE {table}")
                   if c not in ("run_id", "call_id") and "TIMESTAMP" not in kind and c != "latency_ms"]
        tables[table] = read(db, f"SELECT {', '.join(columns)} FROM {table} ORDER BY ALL")
    return tables


def test_workers_fetch_in_other_processes_and_land_the_same_rows(service, fleet_file, db_path, read, tmp_path):
    fleet = fleet_file(40)
    default = refresh_fleet([fleet], RefreshOptions(db=str(tmp_path / "threads.duckdb"), lake=None, datasets=DATASETS,
                                                    chunk_size=8))
    workers = refresh_fleet([fleet], RefreshOptions(db=db_path, lake=None, datasets=DATASETS, chunk_size=8, workers=2))

    assert default["status"] == workers["status"] == "completed"
    assert "fetched_in" not in default  # the thread runner fetches in the flow's own process
    assert workers["fetched_in"] and os.getpid() not in workers["fetched_in"]
    for name in DATASETS:
        assert workers["datasets"][name]["found"] == default["datasets"][name]["found"] > 0
    assert _rows(read, db_path) == _rows(read, str(tmp_path / "threads.duckdb"))
    assert not list((Path(db_path).parent / "staging").glob("*/answers/*"))  # every staged file landed


def test_a_dask_cluster_fetches_end_to_end(service, fleet_file, db_path, read):
    distributed = pytest.importorskip("distributed")
    # Workers inherit this process's environment (the key, the sandbox's URL) when the cluster starts.
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        result = refresh_fleet([fleet_file(24)], RefreshOptions(db=db_path, lake=None, datasets=["specs"], chunk_size=6,
                                                                dask=cluster.scheduler_address))
        with distributed.Client(cluster) as client:
            worker_pids = set(client.run(os.getpid).values())
    specs = result["datasets"]["specs"]
    assert result["status"] == "completed" and specs["found"] + specs["no_data"] == 24
    assert result["fetched_in"] and set(result["fetched_in"]) <= worker_pids  # fetched by the cluster's workers
    assert read(db_path, "SELECT count(DISTINCT vin) FROM api_calls WHERE endpoint = '/specs'") == [(24,)]


@pytest.fixture
def s3(monkeypatch):
    """moto's S3 server on loopback, with a versioned bucket (deleted objects stay listed as versions)."""
    pytest.importorskip("moto")
    pytest.importorskip("boto3")
    s3fs = pytest.importorskip("s3fs")
    with moto_s3(versioned=True) as (port, client):
        for name, value in {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
                            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
            monkeypatch.setenv(name, value)
        s3fs.S3FileSystem.clear_instance_cache()  # fsspec caches a filesystem per arguments: this port, not the last's
        yield client


def test_staging_on_s3_lands_everything_and_leaves_no_staged_object(service, fleet_file, db_path, read, s3):
    result = refresh_fleet([fleet_file(24)], RefreshOptions(db=db_path, lake=None, datasets=["specs"], chunk_size=6, workers=2,
                                                            staging="s3://fleet-staging/runs"))
    specs = result["datasets"]["specs"]
    assert result["status"] == "completed" and specs["found"] + specs["no_data"] == 24
    assert read(db_path, "SELECT count(DISTINCT vin) FROM api_calls WHERE endpoint = '/specs'") == [(24,)]

    listed = s3.list_object_versions(Bucket="fleet-staging", Prefix=f"runs/{result['run_id']}/answers/")
    staged = {v["Key"] for v in listed.get("Versions", [])}
    # One journal per chunk went through the bucket, each with the typed tables its fetch staged beside it...
    assert len({k for k in staged if k.endswith(".arrows")}) == 4
    assert {k for k in staged if k.endswith(".tables.arrow")} == {k[: -len(".arrows")] + ".tables.arrow"
                                                                  for k in staged if k.endswith(".arrows")}
    assert s3.list_objects_v2(Bucket="fleet-staging").get("KeyCount", 0) == 0  # ...and none is left
    assert not list((Path(db_path).parent / "staging").glob("*/answers/*"))


@pytest.mark.parametrize("flags, named", [(["--workers", "0"], "--workers 0"), (["--dask", "localhost"], "--dask localhost"),
                                          (["--staging", "/tmp/x"], "--staging /tmp/x")])
def test_bad_scale_flags_are_refused_in_one_line_before_anything_starts(fleet_file, tmp_path, flags, named):
    done = subprocess.run([sys.executable, "-m", "fleet_data.flows.cli", "refresh", fleet_file(4), "--db", str(tmp_path / "f.duckdb"),
                           *flags], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "VDS_API_KEY": "k", "VDS_BASE_URL": "http://127.0.0.1:9"})
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "f.duckdb").exists()


STAGING = "s3://fleet-staging/runs"


def _staged_on_s3(s3, folder: Path) -> dict[str, Journal]:
    """Every staged journal in the bucket, by key, read back as the lander would (the typed tables staged
    beside a journal, tasks/staging/staged_chunk.py, are its answers again: not read)."""
    staged = {}
    for item in s3.list_objects_v2(Bucket="fleet-staging").get("Contents", []):
        if not item["Key"].endswith(".arrows"):
            continue
        local = folder / item["Key"].replace("/", "_")
        local.write_bytes(s3.get_object(Bucket="fleet-staging", Key=item["Key"])["Body"].read())
        staged[item["Key"]] = read_journal(local)
    return staged


def _put_journal(s3, folder: Path, run_id: str, vins: list[str]) -> str:
    """A staged file of `run_id` on S3: a "no data" answer per VIN, each with the call that paid for it."""
    at = datetime.now(timezone.utc)
    with AnswerJournal.create(folder, run_id, "specs") as journal:
        for vin in vins:
            record = CallRecord(endpoint="specs", method="GET", path="/specs", vin=vin, status=404, attempt=1,
                                latency_ms=1.0, units=0, error=None, will_retry=False)
            journal.answer((f"{run_id}-{vin}", record, at, None), vin, "no_data", at)
    key = f"runs/{run_id}/answers/{journal.path.name}"
    s3.upload_file(str(journal.path), "fleet-staging", key)
    return key


def test_a_staged_file_on_s3_lands_once_and_only_in_the_database_whose_run_paid_for_it(s3, tmp_path):
    """Landed again (the kill came after COMMIT, before the delete) it changes nothing; another database's is left."""
    from fleet_data.tasks.land.recover import land_journals
    from fleet_data.tasks.store.database import open_database

    ours, theirs = "20260101T000000Z-ours", "20260101T000000Z-theirs"
    vins = ["1HGCM82633A004352", "1HGCM82633A004353"]
    key = _put_journal(s3, tmp_path / "a", ours, vins)
    other = _put_journal(s3, tmp_path / "b", theirs, vins)
    with open_database(tmp_path / "fleet.duckdb") as db:
        db.start_run("refresh", run_id=ours)
        landed = land_journals(db, tmp_path / "staging", besides="now", store=STAGING)
        assert landed["journals"] == 1 and landed["calls"] == 2
        keys = {o["Key"] for o in s3.list_objects_v2(Bucket="fleet-staging").get("Contents", [])}
        assert keys == {other}  # landed and deleted; the other database's run is not ours to land

        s3.upload_file(str(next((tmp_path / "a").glob("*"))), "fleet-staging", key)  # as if never deleted
        assert land_journals(db, tmp_path / "staging", besides="now", store=STAGING)["journals"] == 1
        assert db.sql("SELECT run_id, count(*) FROM api_calls GROUP BY ALL").rows() == [(ours, 2)]
        assert db.sql("SELECT run_id, count(*) FROM fetch_status GROUP BY ALL").rows() == [(ours, 2)]


def test_a_run_killed_after_staging_on_s3_is_landed_by_the_next_run_without_calling_again(
        service, fleet_file, db_path, read, s3, tmp_path):
    """Killed (SIGKILL) with its staged files on S3, before landing them; the sandbox's billing is the referee."""
    from prefect.settings import PREFECT_API_URL

    sandbox = service("s3_journal_key")
    sandbox.record_journal(True)
    fleet = fleet_file(24)
    marker = tmp_path / "failpoint-reached"
    env = {**os.environ, "FLEET_FAILPOINT": "staged", "FLEET_FAILPOINT_MARKER": str(marker),
           "PREFECT_API_URL": PREFECT_API_URL.value(), "PYTHONPATH": str(ROOT), "PREFECT_LOGGING_TO_API_ENABLED": "false"}
    command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", fleet, "--db", db_path, "--lake", "", "--datasets", "specs",
               "--chunk-size", "6", "--staging", STAGING]
    # (the key check's call asks about no VIN: connectors/keycheck.py)
    billed = lambda: [c["vin"] for c in sandbox.journal() if c["endpoint"] == "/specs" and c["vin"]]  # noqa: E731
    with (tmp_path / "killed.log").open("wb") as log:
        child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        # Frozen before its first landing, once every call it paid for is staged on S3 (its fetch
        # threads finish their chunks meanwhile) and no call has been answered for a while.
        deadline, seen, quiet_since = time.monotonic() + 180, -1, time.monotonic()
        while True:
            assert child.poll() is None, (tmp_path / "killed.log").read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "the refresh never reached its failpoint with its calls staged"
            calls = billed()
            if len(calls) != seen:
                seen, quiet_since = len(calls), time.monotonic()
            elif marker.exists() and time.monotonic() - quiet_since > 2:
                staged = _staged_on_s3(s3, tmp_path)
                answered = {vin for j in staged.values() for vin, _ in j.final_answers()}
                if calls and set(calls) <= answered:
                    break
            time.sleep(0.1)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    killed_run = {j.run_id for j in staged.values()}
    assert len(killed_run) == 1 and 0 < len(answered) < 24
    # Nothing it fetched landed (its free key check, about no VIN, is in the ledger: connectors/keycheck.py).
    assert read(db_path, "SELECT count(*) FROM api_calls WHERE vin IS NOT NULL") == [(0,)]

    result = refresh_fleet([fleet], RefreshOptions(db=db_path, lake=None, datasets=["specs"], chunk_size=6, staging=STAGING))
    specs = result["datasets"]["specs"]
    assert result["status"] == "completed" and specs["planned"] == 24 - len(answered)
    assert Counter(billed()) == Counter(set(billed())) and len(set(billed())) == 24  # each VIN paid for once
    (run_id,) = killed_run
    staged_calls = sorted((cid, run_id) for j in staged.values() for cid in j.table.column("call_id").to_pylist() if cid)
    assert read(db_path, f"SELECT call_id, run_id FROM api_calls WHERE run_id = '{run_id}' AND vin IS NOT NULL "
                         "ORDER BY 1") == staged_calls  # (its key check, about no VIN, was landed as the run began)
    answered_at = sorted((vin, at) for j in staged.values()
                         for vin, at in zip(j.table.column("vin").to_pylist(), j.table.column("answered_at").to_pylist())
                         if at is not None)
    assert read(db_path, f"SELECT vin, fetched_at FROM fetch_status WHERE run_id = '{run_id}' ORDER BY ALL") == answered_at
    assert s3.list_objects_v2(Bucket="fleet-staging").get("KeyCount", 0) == 0  # landed, then deleted


def test_a_chunk_killed_mid_fetch_with_s3_staging_lands_what_it_journalled_at_the_next_run(
        service, fleet_file, db_path, read, s3, tmp_path, monkeypatch):
    """With --staging s3://, a chunk journals on local disk until it is done; killed before, that journal lands too."""
    from prefect.settings import PREFECT_API_URL

    sandbox = service("s3_journal_mid_fetch")
    sandbox.record_journal(True)
    fleet = fleet_file(24)
    marker, scratch = tmp_path / "failpoint-reached", tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "FLEET_FAILPOINT": "journal_flushed:3", "FLEET_FAILPOINT_MARKER": str(marker),
           "TMPDIR": str(scratch), "PREFECT_API_URL": PREFECT_API_URL.value(), "PYTHONPATH": str(ROOT),
           "PREFECT_LOGGING_TO_API_ENABLED": "false"}
    command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", fleet, "--db", db_path, "--lake", "", "--datasets", "specs",
               "--chunk-size", "12", "--concurrency", "1", "--staging", STAGING]
    # (the key check's call asks about no VIN: connectors/keycheck.py)
    billed = lambda: [c["vin"] for c in sandbox.journal() if c["endpoint"] == "/specs" and c["vin"]]  # noqa: E731
    with (tmp_path / "killed.log").open("wb") as log:
        child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline, seen, quiet_since = time.monotonic() + 180, -1, time.monotonic()
        while not (marker.exists() and seen > 0 and time.monotonic() - quiet_since > 2):  # frozen, no call answered since
            assert child.poll() is None, (tmp_path / "killed.log").read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "the refresh never reached its failpoint"
            if len(calls := billed()) != seen:
                seen, quiet_since = len(calls), time.monotonic()
            time.sleep(0.1)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    first = set(billed())
    local = [read_journal(p) for p in scratch.glob("fleet-staging/*/answers/*.arrows")]
    journalled = {vin for j in [*local, *_staged_on_s3(s3, tmp_path).values()] for vin, _ in j.final_answers()}
    assert {vin for j in local for vin, _ in j.final_answers()}  # a chunk cut mid-fetch left answers on local disk
    killed_run = read(db_path, "SELECT run_id FROM runs")[0][0]
    journalled |= {vin for (vin,) in read(db_path, f"SELECT vin FROM fetch_status WHERE run_id = '{killed_run}'")}

    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # this process's temporary folder is the killed run's
    result = refresh_fleet([fleet], RefreshOptions(db=db_path, lake=None, datasets=["specs"], chunk_size=12, concurrency=1,
                                                   staging=STAGING))
    assert result["status"] == "completed"
    paid = Counter(billed())
    assert set(paid) == {vin for (vin,) in read(db_path, "SELECT vin FROM fetch_status")} and len(paid) == 24
    again = {vin for vin, n in paid.items() if n > 1}
    assert not again & journalled  # nothing journalled was bought again: only calls in flight at the kill
    assert again <= first - journalled and len(again) <= 1  # --concurrency 1: at most one call in flight
    assert read(db_path, f"SELECT count(*) FROM fetch_status WHERE run_id = '{killed_run}'") == [(len(journalled),)]
    assert not list(scratch.glob("fleet-staging/*/answers/*"))
    assert s3.list_objects_v2(Bucket="fleet-staging").get("KeyCount", 0) == 0
    # The chunk's copy on S3 (tasks/staging/mirror.py) may be behind its journal: the journal's answered calls stay known.
    answered = {call_id for j in local for call_id, record, _, _ in j.calls() if not record.unknown}
    assert not answered & {c for (c,) in read(db_path, "SELECT call_id FROM api_calls WHERE billing = 'unknown'")}
