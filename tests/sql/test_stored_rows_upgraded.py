"""Rows stored before migrations 0016-0017 are rewritten by them (issue 30): raw answers under the service's path,
as api_calls has it, and 5xx failures marked worth asking again, as the data dictionary says."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone

from fleet_data.tasks.store.database import SQL_DIR, Database

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _before(tmp_path, last: int) -> Database:
    """A store with the migrations before `last + 1` only, as an earlier version of this tool left it."""
    older = tmp_path / "migrations"
    older.mkdir()
    for path in sorted((SQL_DIR / "migrations").glob("*.sql")):
        if int(path.name[:4]) <= last:
            shutil.copy(path, older)
    return Database(tmp_path / "old.duckdb", migrations_dir=older, views_dir=tmp_path / "no_views")


def test_stored_raw_answers_are_renamed_to_the_path_api_calls_has(tmp_path):
    old = _before(tmp_path, 15)
    for i, name in enumerate(("specs", "market-value", "recalls-batch-results", "recalls-ymm", "/specs")):
        old.connection.execute(
            "INSERT INTO raw_responses (response_hash, dataset, vin, endpoint, status, body, run_id, fetched_at) "
            "VALUES (?, 'specs', ?, ?, 200, '{}', 'r0', ?)", [f"h{i}", f"VIN{i}", name, AT])
    old.close()
    with Database(tmp_path / "old.duckdb") as upgraded:
        assert 17 in upgraded.applied
        rows = upgraded.sql("SELECT response_hash, endpoint FROM raw_responses ORDER BY response_hash").rows()
    assert rows == [("h0", "/specs"), ("h1", "/v2/marketvalue"), ("h2", "/v1/recalls-batch/results"),
                    ("h3", "/v1/recalls-ymm"), ("h4", "/specs")]


def test_stored_5xx_failures_become_retryable_but_not_cv_or_validation_ones(tmp_path):
    old = _before(tmp_path, 15)
    failures = [("V500", 500, "Internal server error", False), ("V502", 502, "Could not fetch data", False),
                ("VCV1", 500, "Unable to authenticate internal request (code CV-001). Please try again later", False),
                ("VLEG", 500, "Missing vin (vehicle identification number)", False),
                ("V400", 400, "Invalid VIN", False), ("VNONE", None, "ReadTimeout", True)]
    for vin, status, message, retryable in failures:
        old.connection.execute(
            "INSERT INTO failures (vin, dataset, status, message, retryable, attempts, run_attempts, first_failed_at, "
            "run_id, fetched_at) VALUES (?, 'specs', ?, ?, ?, 2, 2, ?, 'r0', ?)", [vin, status, message, retryable, AT, AT])
    old.close()
    with Database(tmp_path / "old.duckdb") as upgraded:
        got = dict(upgraded.sql("SELECT vin, retryable FROM failures").rows())
    assert got == {"V500": True, "V502": True, "VCV1": False, "VLEG": False, "V400": False, "VNONE": True}
