"""The exit code says how a run ended, so cron and Prefect can tell (tasks/exitcodes.py).

Real runs against the sandbox over a real socket, its accounts setting the scene: a quota that stops
a dataset half way (partial, 3), a key the service does not know (refused, 4), a plan dearer than
--max-units (refused, 4). The summary is still printed, as JSON here.
"""

from __future__ import annotations

import json

import pytest

from fleet_data.tasks import exitcodes
from fleet_data.flows.cli import main
from fleet_data.flows.outcome import exit_code

pytestmark = pytest.mark.usefixtures("prefect_server")


def refresh(service, key: str, fleet: str, db: str, capsys, *extra: str) -> tuple[int, dict]:
    service(key)
    code = main(["refresh", fleet, "--db", db, "--lake", "", "--datasets", "specs", "--concurrency", "2",
                 "--chunk-size", "5", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_a_quota_stopped_run_with_pending_vins_exits_partial(service, fleet_file, db_path, capsys):
    code, summary = refresh(service, "test_quota_6", fleet_file(12), db_path, capsys)
    specs = summary["datasets"]["specs"]
    assert specs["found"] + specs["no_data"] == 6 and specs["pending"] == 6 and "429" in specs["stop_reason"]
    assert summary["status"] == "partial"
    assert code == exitcodes.PARTIAL == 3


def test_a_key_refused_on_every_call_exits_refused(service, fleet_file, db_path, capsys):
    code, summary = refresh(service, "test_unknown", fleet_file(12), db_path, capsys)
    assert summary["datasets"]["specs"]["pending"] == 12 and "401" in summary["datasets"]["specs"]["stop_reason"]
    assert code == exitcodes.REFUSED == 4


def test_a_plan_dearer_than_max_units_exits_refused(service, fleet_file, db_path, capsys):
    code, summary = refresh(service, "flow_test_key_7c1e", fleet_file(12), db_path, capsys, "--max-units", "3")
    assert summary["status"] == "refused" and summary["calls"] == 0
    assert code == exitcodes.REFUSED


def _summary(status: str, **specs: object) -> dict:
    counts = {"planned": 4, "found": 0, "no_data": 0, "failed": 0, "pending": 0, "stop_reason": None, **specs}
    return {"status": status, "datasets": {"specs": counts}}


@pytest.mark.parametrize("summary,code", [
    (_summary("completed", found=4), 0),
    (_summary("planned"), 0),
    (_summary("partial", found=2, pending=2, stop_reason="429 quota"), 3),
    (_summary("partial", found=3, failed=1), 3),
    (_summary("partial", pending=4, stop_reason="403 This API key has been blocked"), 4),
    (_summary("partial", found=1, pending=3, stop_reason="401 unknown key"), 3),  # it answered once: partial
    (_summary("partial", pending=4, stop_reason="402 insufficient credits"), 3),  # paying fixes it: run again
    (_summary("refused"), 4),
    (_summary("cancelled", found=1, pending=3), 5),
    (_summary("mystery"), 1),
])
def test_the_status_to_code_table(summary, code):
    assert exit_code(summary) == code
