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


def test_a_refused_key_is_refused_by_one_free_call_before_prefect_starts(service, fleet_file, db_path, capsys,
                                                                           monkeypatch, read):
    """Issue 27: a refused key was refused after Prefect's start (24 s). Now one free call says it first; the run
    is recorded as the flow would have recorded it, its VINs left pending with the refusal as the reason."""
    from fleet_data.flows import commands

    def no_prefect(*args, **kwargs):
        raise AssertionError("Prefect was started for a refused key")

    monkeypatch.setattr(commands, "start_prefect", no_prefect)
    service().record_journal()
    code, summary = refresh(service, "test_unknown", fleet_file(12), db_path, capsys)
    assert code == exitcodes.REFUSED
    specs = summary["datasets"]["specs"]
    assert (specs["pending"], specs["calls"], summary["calls"], summary["units"]) == (12, 0, 1, 0)
    assert specs["stop_reason"].startswith("401 User with this API key was not found"), specs
    assert "refused the key" in summary["message"]
    assert [(c["endpoint"], c["status"]) for c in service().journal() if c["key"] == "test_unknown"] == [("/specs", 401)]
    assert read(db_path, "SELECT endpoint, vin, status, units, billing, service FROM api_calls") == [
        ("/specs", None, 401, 0, "known", service().url)]
    assert read(db_path, "SELECT status, units_used FROM runs") == [("partial", 0)]
    assert read(db_path, "SELECT status, count(*), min(reason) FROM vin_status WHERE dataset = 'specs' GROUP BY ALL") \
        == [("pending", 12, specs["stop_reason"])]


def test_a_usable_keys_check_is_one_free_call_in_the_ledger(service, fleet_file, db_path, capsys, read):
    code, summary = refresh(service, "keycheck_ok_5d2", fleet_file(6), db_path, capsys)
    assert code == 0 and summary["datasets"]["specs"]["found"] + summary["datasets"]["specs"]["no_data"] == 6
    assert read(db_path, "SELECT status, units, error_message, service = (SELECT service FROM runs) FROM api_calls "
                         "WHERE vin IS NULL") == [(400, 0, "KeyAccepted", True)]  # the run's, as every call says
    assert read(db_path, "SELECT sum(failed_calls) FROM units_by_month") == [(0,)]  # the check's 400 is no failure
    assert read(db_path, "SELECT sum(units) FROM api_calls") == [(summary["units"],)]


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
