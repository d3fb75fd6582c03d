"""Two refreshes against the sandbox (a separate process, real sockets): exactly the expected changes.

Between the first and the second refresh the sandbox is told that four vehicles changed: a new
park-it campaign and a closed one, a 30% value drop and a new decode, a new title brand
and a lower odometer reading, a released lien. A webhook receiver gets them once, with a `text`
field and without the key; a third refresh where nothing changed records and posts nothing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import httpx
import polars as pl
import pytest

from fleet_data.connectors.sandbox import Sandbox
from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import RefreshOptions
from fleet_data.tasks.store.database import open_database
from fleet_data.tasks.outputs.summary import summary_markdown

from ..connectors.receiver import Receiver
from .conftest import sample_rows

KEY = "changes_test_key_5d2a"
VIN_RECALLS = "2T1BURHE2PE979297"  # two open campaigns
VIN_VALUE = "1G1FB1RX0GU436062"
VIN_TITLE = "3VWDP7AJ2JS302586"  # no title brand yet
VIN_LIEN = "1C4HJXDG1C5016926"  # a Recovery and a Lien
UNCHANGED = ["5YJYGDEE0J7648039", "1FA6P8TH7F2332882"]
PARK_IT = {"nhtsa_campaign_number": "26V999000", "component": "AIR BAGS", "park_it": True,
           "summary": "The driver air bag inflator may rupture."}
ROLLBACK = {"date": "2026-09-01", "state": "TX", "odometer": 1200, "odometer_unit": "miles", "event": "Title issued"}


def _service(sandbox: Sandbox, path: str, vin: str) -> dict:
    with httpx.Client(base_url=sandbox.url, timeout=10, trust_env=False) as http:
        return http.get(path, params={"vin": vin, "key": KEY}).json()


def _subject(event: dict) -> str:
    return f"{event['event']} {event['location']}: " + "; ".join(event["details_list"])


@pytest.fixture(scope="module")
def scenario(prefect_server, tmp_path_factory):
    sandbox = Sandbox.start_subprocess()
    patch = pytest.MonkeyPatch()
    try:
        patch.setenv("VDS_BASE_URL", sandbox.url)
        patch.setenv("VDS_API_KEY", KEY)
        folder = tmp_path_factory.mktemp("changes")
        fleet, db = str(folder / "fleet.csv"), str(folder / "fleet.duckdb")
        vins = [VIN_RECALLS, VIN_VALUE, VIN_TITLE, VIN_LIEN, *UNCHANGED]
        sample_rows(200).filter(pl.col("vin").is_in(vins)).write_csv(fleet)

        with Receiver() as receiver:
            def refresh(**options):
                return refresh_fleet([fleet], RefreshOptions(db=db, lake=None, chunk_size=4, notify=receiver.url, **options))

            first = refresh()
            posts_first = len(receiver.posts)

            recalls = _service(sandbox, "/v1/recalls", VIN_RECALLS)["data"]["recalls"]
            history = _service(sandbox, "/history", VIN_TITLE)
            events = _service(sandbox, "/v1/lien-theft", VIN_LIEN)["events"]
            lien = next(e for e in events if e["event"] == "Lien")
            sandbox.set_vehicle(VIN_RECALLS, recalls=[*recalls[1:], PARK_IT])
            sandbox.set_vehicle(VIN_VALUE, value_factor=0.7, specs={"trim": "Changed Trim"})  # a 30% drop
            sandbox.set_vehicle(VIN_TITLE, title_brands=["Salvage"],
                                history={"historyInformation": [*history["historyInformation"], ROLLBACK]})
            sandbox.set_vehicle(VIN_LIEN, lien_theft=[e for e in events if e is not lien])

            second = refresh(force=True)
            posts_second = list(receiver.posts)
            third = refresh(force=True)
            yield SimpleNamespace(db=db, first=first, second=second, third=third, posts_first=posts_first,
                                  posts_second=posts_second, posts=list(receiver.posts), closed=recalls[0],
                                  lien=lien, history=history)
    finally:
        patch.undo()
        sandbox.stop()


def _changes(db: str, run_id: str) -> list[tuple]:
    with open_database(db) as store:
        return store.sql("SELECT vin, dataset, kind, subject, severity FROM changes WHERE run_id = $run ORDER BY ALL",
                         {"run": run_id}).rows()


def test_a_first_refresh_records_no_change_and_posts_nothing(scenario):
    assert scenario.first["status"] == "completed"
    assert _changes(scenario.db, scenario.first["run_id"]) == []
    assert scenario.first["changes"]["total"] == 0
    assert scenario.posts_first == 0
    assert scenario.first["notification"] == {"sent": False, "reason": "nothing changed"}
    # Not "no changes": a vehicle's first answer has nothing to compare with (issue 30).
    assert summary_markdown(scenario.first).splitlines()[2] == (
        "- First answers for these vehicles: nothing to compare with yet (a change is a difference from a vehicle's "
        "previous answer).")


def test_the_second_refresh_records_exactly_what_the_sandbox_was_told(scenario):
    assert scenario.second["status"] == "completed"
    highest = max(r["odometer"] for r in scenario.history["historyInformation"])
    assert highest > ROLLBACK["odometer"]
    assert _changes(scenario.db, scenario.second["run_id"]) == sorted([
        (VIN_RECALLS, "recalls", "closed_recall", scenario.closed["nhtsa_campaign_number"], "info"),
        (VIN_RECALLS, "recalls", "new_recall", "26V999000", "park_now"),
        (VIN_VALUE, "market_value", "value_move", "", "info"),
        (VIN_VALUE, "specs", "decode_changed", "", "info"),
        (VIN_TITLE, "history", "new_title_brand", "Salvage", "high"),
        (VIN_TITLE, "history", "odometer_rollback", "2026-09-01", "high"),
        (VIN_LIEN, "lien_theft", "released_lien", _subject(scenario.lien), "info"),
    ])
    with open_database(scenario.db) as store:
        before, after = store.sql("SELECT before, after FROM changes WHERE kind = 'value_move'").row(0)
    before, after = json.loads(before), json.loads(after)
    assert after["retail"] == pytest.approx(before["retail"] * 0.7, rel=0.01)  # what the sandbox was told
    assert after["change_pct"] == pytest.approx(-30, abs=1)


def test_the_drop_shows_over_six_months_as_first_observed_not_rescaled(scenario):
    """Issue 26: every answer restates the six months before it on its own scale, so the second answer gave the
    past 30% lower too; kept as first observed, the six-month change is the drop, not -6%."""
    with open_database(scenario.db) as store:
        pct, same = store.sql("SELECT change_pct, same_request FROM vehicle_value_change WHERE vin = $v AND months = 6",
                              {"v": VIN_VALUE}).row(0)
        observations = store.sql("SELECT count(DISTINCT fetched_at) FROM trade_in_history WHERE vin = $v",
                                 {"v": VIN_VALUE}).item()
    assert observations == 3  # each refresh's answer kept
    assert float(pct) == pytest.approx(100 * (0.7 / 1.06 - 1), abs=0.5) and same  # the sandbox's past is 6% higher


def test_the_summary_and_the_artifact_lead_with_the_changes(scenario):
    changes = scenario.second["changes"]
    assert changes["total"] == 7 and changes["vehicles"] == 4 and changes["park_now"] == 1
    assert changes["by_kind"] == {"new_recall": 1, "new_title_brand": 1, "odometer_rollback": 1, "closed_recall": 1,
                                  "decode_changed": 1, "released_lien": 1, "value_move": 1}
    assert [v["vin"] for v in changes["park_now_vehicles"]] == [VIN_RECALLS]
    assert list(scenario.second)[:4] == ["run_id", "kind", "status", "changes"]  # --json leads with them
    lines = summary_markdown(scenario.second).splitlines()
    assert lines[2].startswith("- **1 vehicle must be parked now** (new park-it recall)")
    assert "7 changes on 4 vehicles" in lines[3]

    from prefect.client.orchestration import get_client

    async def artifacts():
        async with get_client() as client:
            return await client.read_artifacts(limit=200)

    run_id = scenario.second["run_id"]
    [artifact] = [a for a in asyncio.run(artifacts()) if run_id in str(a.description)]
    assert artifact.data.splitlines()[2].startswith("- **1 vehicle must be parked now**")


def test_the_webhook_got_them_once_with_text_and_without_the_key(scenario):
    assert len(scenario.posts_second) == 1 and scenario.second["notification"]["sent"] is True
    [post] = scenario.posts_second
    message = post.json()
    assert message["run_id"] == scenario.second["run_id"]
    assert message["text"].startswith("fleet refresh") and "1 vehicle must be parked now" in message["text"]
    assert VIN_RECALLS in message["text"]
    got = sorted((c["vin"], c["dataset"], c["kind"], c["subject"], c["severity"]) for c in message["changes"])
    assert got == _changes(scenario.db, scenario.second["run_id"])
    assert message["changes"][0]["severity"] == "park_now"  # most severe first
    assert post.headers["Idempotency-Key"] == f"fleet-changes-{scenario.second['run_id']}"
    for part in (post.body.decode(), json.dumps(post.headers), post.query, post.path):
        assert KEY not in part
    assert scenario.second["notification"]["target"].startswith("http://127.0.0.1:")
    assert "secretpart" not in json.dumps(scenario.second)  # the webhook's path is never reported


def test_a_third_refresh_where_nothing_changed_records_and_posts_nothing(scenario):
    assert scenario.third["status"] == "completed"
    assert _changes(scenario.db, scenario.third["run_id"]) == []
    assert len(scenario.posts) == 1
    assert scenario.third["notification"] == {"sent": False, "reason": "nothing changed"}
    assert scenario.third["datasets"]["specs"]["found"] == 6  # it did fetch everything again
    # Compared with the second's answers: nothing moved.
    assert summary_markdown(scenario.third).splitlines()[2] == "- No changes since the vehicles' previous answers."


def test_the_report_of_a_later_run_that_changed_nothing_still_lists_what_changed(scenario):
    """The third refresh changed nothing; its report (beside the database) still lists the second's changes: "What
    changed" covers the last 7 days and everything since the previous report, not only the latest run (issue 30)."""
    from .test_report import table_rows

    page = Path(scenario.db).with_suffix(".report.html").read_text(encoding="utf-8")
    assert scenario.third["run_id"] in page  # written by the third run
    listed = sorted(r[2] for t in ("table-changes", "table-changes-info") for r in table_rows(page, t))
    assert listed == sorted(vin for vin, *_ in _changes(scenario.db, scenario.second["run_id"])) and len(listed) == 7
    assert "Nothing changed" not in page


@pytest.mark.parametrize("option, phrase", [
    (["--notify", "ftp://hooks.example/x"], "--notify: ftp://hooks.example is not an http(s) URL"),
    (["--notify", "hooks.slack.com/services/T0"], "--notify: the URL is not an http(s) URL"),
    (["--value-move", "0"], "--value-move 0: a value move is a percentage above 0"),
])
def test_a_bad_notify_url_or_threshold_is_refused_before_anything_starts(option, phrase, tmp_path, capsys, monkeypatch):
    from fleet_data.flows.cli import main

    monkeypatch.delenv("VDS_API_KEY", raising=False)
    monkeypatch.delenv("VDS_BASE_URL", raising=False)
    fleet = tmp_path / "fleet.csv"
    sample_rows(3).write_csv(fleet)
    assert main(["refresh", str(fleet), "--db", str(tmp_path / "fleet.duckdb"), *option]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"error: {phrase}") and len(err.splitlines()) == 1, err
    assert out == "" and not (tmp_path / "fleet.duckdb").exists()  # nothing was started or written
