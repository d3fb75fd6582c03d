"""moto's S3 server on loopback with the staging bucket made: the object store the staging tests use."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.tcp_relay import free_port

BUCKET = "fleet-staging"


@contextlib.contextmanager
def moto_s3(versioned: bool = False) -> Iterator[tuple[int, Any]]:
    """(port, a boto3 client of it) with `BUCKET` made (versioned: deleted objects stay listed as versions);
    the server is stopped on exit."""
    import boto3

    port = free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id="testing",
                              aws_secret_access_key="testing", region_name="us-east-1")
        for _ in range(100):  # up to 10 s for the server to listen
            try:
                client.create_bucket(Bucket=BUCKET)
                break
            except Exception:
                time.sleep(0.1)
        if versioned:
            client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        yield port, client
    finally:
        server.terminate()
        server.wait(timeout=10)
