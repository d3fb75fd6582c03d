"""Forged webhooks against a real `fleet refresh --webhook-listen` waiting on a sandbox batch.

The refresh runs in a child process (its memory is what we measure), the sandbox in another (its
counters are the referee). Two batches: a small one that finishes at once, whose genuine delivery
tells the test the run's secret token (its results are fetched then, while the large one still
runs: batches progress side by side), and a large one the run then waits for while the test posts
10,000 forgeries: wrong or missing token, unknown batch ids, a list as batchId, 1 MB bodies, and
repeats of the small, landed batch's delivery. None may mark the large batch or cause a status read (the
rate limit for repeats of an awaited batch's delivery is tested in tests/connectors/test_webhooks.py);
the receiving process's memory stays flat and its stderr small.
"""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import psutil
import pytest

from fleet_data.connectors.sandbox import Sandbox

pytestmark = pytest.mark.usefixtures("prefect_server")
ROOT = Path(__file__).resolve().parents[2]
KEY = "webhook_attack_key_5d1f"
BIG, SMALL = 150, 5  # VINs per batch: --batch-size 150 over 155 VINs
STATUS = "/v1/recalls-batch/status"
RESULTS = "/v1/recalls-batch/results"
FALLBACK = 60.0  # the receiver's waiter reads the status once a minute in case a delivery is lost


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, timeout: float, what: str, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the refresh exited ({process.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_forged_deliveries_mark_nothing_cost_no_status_reads_and_no_memory(tmp_path, fleet_file):
    from prefect.settings import PREFECT_API_URL

    fleet = fleet_file(BIG + SMALL)
    db = tmp_path / "fleet.duckdb"
    listen = f"127.0.0.1:{free_port()}"
    stderr_path = tmp_path / "stderr.txt"
    # 1 VIN/s: the small batch ends in 5 s, the large one would take minutes until the test speeds it up.
    sandbox = Sandbox.start_subprocess(["--insecure-webhooks", "--batch-rate", "1"])
    process = None
    try:
        env = {**os.environ, "VDS_BASE_URL": sandbox.url, "VDS_API_KEY": KEY, "PYTHONPATH": str(ROOT),
               "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_LOGGING_TO_API_ENABLED": "false"}
        command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", fleet, "--db", str(db), "--lake", "",
                   "--datasets", "recalls", "--batch-size", str(BIG), "--webhook-listen", listen,
                   # Details by model come after the batches: by VIN, the small batch's would be looked up
                   # while the forgeries are posted, and their work would be in the memory measured.
                   "--recall-details", "model"]
        with stderr_path.open("wb") as err:
            process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err,
                                       start_new_session=True)

        def delivered() -> list[dict]:
            return [w for w in sandbox.webhooks() if w.get("status")]

        wait_until(lambda: len(delivered()) == 1, 120, "the small batch's delivery", process)
        genuine = delivered()[0]
        url = genuine["url"]
        token = parse_qs(urlsplit(url).query)["token"][0]
        assert genuine["status"] == 204 and genuine["payload"]["totalVins"] == SMALL
        # The small batch's delivery gets its results fetched at once; the large batch is the one the
        # run waits for now (its first status read is done).
        wait_until(lambda: sandbox.count(RESULTS) == 1, 60, "the small batch's results", process)
        # ... and landed (shredded here, in memory the forgeries must not be charged with): its VINs are counted.
        wait_until(lambda: f": {SMALL}/{BIG + SMALL} " in stderr_path.read_text(), 60, "the small batch landed", process)
        submits = sandbox.count("/v1/recalls-batch/submit")
        assert submits == 2 and sandbox.count(STATUS) >= 2

        receiver = psutil.Process(process.pid)
        rss_before = receiver.memory_info().rss
        reads_before = sandbox.count(STATUS)
        base = url.split("?")[0]
        payload = dict(genuine["payload"], status="completed")
        megabyte = b'{"event": "recalls_batch.completed", "batchId": "x", "status": "completed", "pad": "' + b"y" * 1_048_576 + b'"}'
        answers: dict[str, list] = {}
        started = time.monotonic()
        with httpx.Client(timeout=10) as http:
            def post(kind: str, n: int, make) -> None:  # noqa: ANN001
                for i in range(n):
                    target, kwargs = make(i)
                    try:
                        answers.setdefault(kind, []).append(http.post(target, **kwargs).status_code)
                    except httpx.TransportError:
                        answers.setdefault(kind, []).append("closed")

            post("no token", 1500, lambda i: (base, {"json": payload}))
            post("wrong token", 1500, lambda i: (f"{base}?token={token[:-2]}xx", {"json": payload}))
            post("unknown batch", 4000, lambda i: (url, {"json": dict(payload, batchId=f"rb_forged_{i}")}))
            post("list batchId", 1500, lambda i: (url, {"json": dict(payload, batchId=[payload["batchId"]])}))
            post("not json", 1000, lambda i: (url, {"content": b"\x00" * 200}))
            post("1 MB", 40, lambda i: (url, {"content": megabyte, "headers": {"content-type": "application/json"}}))
            # The small batch's own delivery again (right token): landed, it is no longer awaited.
            post("repeats", 500, lambda i: (url, {"json": payload}))
        forged_for = time.monotonic() - started
        print(f"{sum(len(a) for a in answers.values())} forged posts in {forged_for:.1f} s; "
              f"receiver RSS {rss_before / 2**20:.1f} MB -> {receiver.memory_info().rss / 2**20:.1f} MB")
        rss_after = receiver.memory_info().rss
        reads_during = sandbox.count(STATUS) - reads_before

        assert sum(len(a) for a in answers.values()) >= 10_000
        expected = {"no token": {403}, "wrong token": {403}, "unknown batch": {404}, "list batchId": {400},
                    "not json": {400}, "1 MB": {413, "closed"}, "repeats": {404}}
        got = {k: set(v) for k, v in answers.items()}
        assert all(got[k] <= expected[k] for k in expected), got
        assert process.poll() is None and sandbox.count(RESULTS) == 1  # nothing marked: still waiting
        # Not one forgery woke the waiter: only its once-a-minute fallback may have read the status.
        assert reads_during <= math.ceil(forged_for / FALLBACK), (reads_during, forged_for)
        assert rss_after - rss_before < 20 * 2**20, (rss_before, rss_after)

        sandbox.set_batch_rate(10_000)  # let the large batch finish: its genuine delivery ends the wait
        assert process.wait(timeout=180) == 0
        assert len(delivered()) == 2
        # Per batch: the first read and one per genuine delivery; and the large batch's fallback reads.
        elapsed = time.monotonic() - started
        assert sandbox.count(STATUS) <= 2 * 2 + math.ceil(elapsed / FALLBACK), sandbox.count(STATUS)
        assert sandbox.count(RESULTS) == 2
    finally:
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        sandbox.stop()

    stderr = stderr_path.read_bytes()
    assert len(stderr) < 64 * 1024, stderr[-2000:]
    assert token.encode() not in stderr
    from fleet_data.tasks.store.database import open_database

    with open_database(str(db)) as store:
        by_batch = "SELECT count(*), count(DISTINCT vin) FROM recall_checks WHERE batch_id IS NOT NULL"
        assert store.sql(by_batch).rows() == [(BIG + SMALL, BIG + SMALL)]
        assert store.sql("SELECT count(*) FROM api_calls").rows()[0][0] > 0
        urls = store.sql("SELECT DISTINCT webhook_url FROM recall_batches").rows()
        assert urls == [(f"http://{listen}/recalls-batch",)]  # stored without the token
    assert all(token.encode() not in path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()
               and path != stderr_path)
