"""Fetch anywhere (issue 13): fetch tasks in worker processes, on a Dask cluster, staged on S3.

A fetch task takes a slice of the due list and writes a staged file; the flow lands each file in its
own process. Each test is one or two flow runs against the sandbox over loopback.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows.refresh import refresh_fleet

pytestmark = pytest.mark.usefixtures("prefect_server")

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
    default = refresh_fleet([fleet], db=str(tmp_path / "threads.duckdb"), lake=None, datasets=DATASETS, chunk_size=8)
    workers = refresh_fleet([fleet], db=db_path, lake=None, datasets=DATASETS, chunk_size=8, workers=2)

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
        result = refresh_fleet([fleet_file(24)], db=db_path, lake=None, datasets=["specs"], chunk_size=6,
                               dask=cluster.scheduler_address)
        with distributed.Client(cluster) as client:
            worker_pids = set(client.run(os.getpid).values())
    specs = result["datasets"]["specs"]
    assert result["status"] == "completed" and specs["found"] + specs["no_data"] == 24
    assert result["fetched_in"] and set(result["fetched_in"]) <= worker_pids  # fetched by the cluster's workers
    assert read(db_path, "SELECT count(DISTINCT vin) FROM api_calls WHERE endpoint = '/specs'") == [(24,)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def s3(monkeypatch):
    """moto's S3 server on loopback, with a versioned bucket (deleted objects stay listed as versions)."""
    pytest.importorskip("moto")
    boto3 = pytest.importorskip("boto3")
    port = _free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for name, value in {"AWS_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    try:
        client = boto3.client("s3", endpoint_url=url)
        for _ in range(100):  # up to 10 s for the server to listen
            try:
                client.create_bucket(Bucket="fleet-staging")
                break
            except Exception:
                time.sleep(0.1)
        client.put_bucket_versioning(Bucket="fleet-staging", VersioningConfiguration={"Status": "Enabled"})
        yield client
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_staging_on_s3_lands_everything_and_leaves_no_staged_object(service, fleet_file, db_path, read, s3):
    result = refresh_fleet([fleet_file(24)], db=db_path, lake=None, datasets=["specs"], chunk_size=6, workers=2,
                           staging="s3://fleet-staging/runs")
    specs = result["datasets"]["specs"]
    assert result["status"] == "completed" and specs["found"] + specs["no_data"] == 24
    assert read(db_path, "SELECT count(DISTINCT vin) FROM api_calls WHERE endpoint = '/specs'") == [(24,)]

    listed = s3.list_object_versions(Bucket="fleet-staging", Prefix=f"runs/{result['run_id']}/answers/")
    staged = {v["Key"] for v in listed.get("Versions", [])}
    assert len(staged) == 4  # one staged file per chunk went through the bucket...
    assert s3.list_objects_v2(Bucket="fleet-staging").get("KeyCount", 0) == 0  # ...and none is left
    assert not list((Path(db_path).parent / "staging").glob("*/answers/*"))


@pytest.mark.parametrize("flags, named", [(["--workers", "0"], "--workers 0"), (["--dask", "localhost"], "--dask localhost"),
                                          (["--staging", "/tmp/x"], "--staging /tmp/x")])
def test_bad_scale_flags_are_refused_in_one_line_before_anything_starts(fleet_file, tmp_path, flags, named):
    done = subprocess.run([sys.executable, "-m", "flows.cli", "refresh", fleet_file(4), "--db", str(tmp_path / "f.duckdb"),
                           *flags], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "VDS_API_KEY": "k", "VDS_BASE_URL": "http://127.0.0.1:9"})
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "f.duckdb").exists()
