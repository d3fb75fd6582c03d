"""The numbers an analyst reads off the views (issue 21), on the sample fleet as a refresh lands it.

The sandbox's answers for data/sample_fleet.csv (its own functions, no socket) go through the real result
models and staging frames into a real database file, each dataset for the vehicles its markets cover, as the
plan asks: specs for all (a 404 "no data" where the sandbox has none), history and lien/theft for US vehicles,
valuations for US and Canadian ones asked as `valuation_request` asks, recall batch counts for North America.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

import polars as pl
import pytest

from fleet_data.connectors import models as m
from fleet_data.connectors.models.market_value import MarketValue
from fleet_data.connectors.sandbox import recalls as sandbox_recalls
from fleet_data.connectors.sandbox import valuation
from fleet_data.connectors.sandbox import vehicles as sandbox_data
from fleet_data.tasks.land import frames as staging
from fleet_data.tasks.datasets import REGISTRY, valuation_request
from fleet_data.tasks.ingest.fleet_files import read_fleet
from fleet_data.tasks.ingest.markets import applies, with_market
from fleet_data.tasks.plan.due import DueRule, make_plan
from fleet_data.tasks.store.database import SQL_DIR, open_database

SAMPLE = SQL_DIR.parent / "data" / "sample_fleet.csv"
NOW = datetime.now(UTC).replace(microsecond=0)
RUN = "r-sample"


def _in(dataset: str, roster: pl.DataFrame) -> pl.DataFrame:
    markets = REGISTRY[dataset].markets
    return roster.filter(pl.Series([applies(markets, x) for x in roster["market"]], dtype=pl.Boolean))


def _status(rows: list[tuple[str, str, str]]) -> pl.DataFrame:
    return pl.DataFrame([{"vin": v, "dataset": d, "outcome": o, "fetched_at": NOW} for v, d, o in rows],
                        schema={"vin": pl.String, "dataset": pl.String, "outcome": pl.String, "fetched_at": staging.TS})


def land_sample(db) -> pl.DataFrame:
    """The sample fleet as a first refresh lands it; its roster (with each vehicle's market)."""
    ingest = read_fleet([str(SAMPLE)])
    db.start_run("refresh", [str(SAMPLE)], run_id=RUN, started_at=NOW)
    db.land_chunk({"vehicles": ingest.roster}, RUN)
    roster = with_market(ingest.roster)
    has_data = {v: sandbox_data.vehicle(v).has_data for v in roster["vin"]}
    known = [v for v in roster["vin"] if has_data[v]]

    specs = [(v, m.SpecsResult.from_payload({"success": True, **sandbox_data.specs(v)}), NOW) for v in known]
    db.land("specs", staging.specs_frame(specs), RUN)
    us = [v for v in _in("history", roster)["vin"] if has_data[v]]
    history = [(v, m.HistoryReport.from_payload({"success": True, **sandbox_data.history(v)}), NOW) for v in us]
    db.land("history_reports", staging.history_frame(history), RUN)
    status = [(v, "specs", "found" if has_data[v] else "no_data") for v in roster["vin"]]
    status += [(v, "history", "found") for v in us]

    valued, asked = [], {}
    for row in _in("market_value", roster).filter(pl.col("vin").is_in(known)).iter_rows(named=True):
        request = valuation_request(row)
        tier = valuation.parse_condition(request["condition"])
        body = valuation.market_value_v2(row["vin"], request["state"], request["mileage"], tier)
        valued.append((row["vin"], MarketValue.from_payload({"success": True, **body}), NOW))
        asked[row["vin"]] = request
        status.append((row["vin"], "market_value", "found"))
    db.land("market_values", staging.market_values_frame(valued, asked), RUN)
    db.land("trade_in_history", staging.trade_in_history_frame(valued, asked), RUN)

    items = [m.BatchResultItem.model_validate(sandbox_recalls.batch_result(v)) for v in _in("recalls", roster)["vin"]]
    db.land("recall_checks", staging.recall_checks_from_batch(items, "b1", NOW), RUN)
    db.land("fetch_status", _status(status), RUN)
    db.finish_run(RUN, "completed", counts=ingest.summary(), finished_at=NOW)
    return roster


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    with open_database(tmp_path_factory.mktemp("sample") / "fleet.duckdb") as db:
        roster = land_sample(db)
        yield db, roster


def readme_query(marker: str) -> str:
    """The example query of sql/README.md whose first comment line starts with `marker`."""
    text = (SQL_DIR / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"^```sql\n(.*?)^```", text, flags=re.S | re.M) if b.startswith(marker)]
    return block.strip().rstrip(";")


# -- 1. odometer rollbacks -----------------------------------------------------------------------------------
def test_the_documented_rollback_query_finds_no_false_rollback_on_the_sample_fleet(sample):
    db, _ = sample
    query = readme_query("-- Readings lower than an earlier one")
    # The sandbox dates a vehicle's late titles on one day (2026-10-31), odometers rising in the report's order:
    # with those days' readings in any order, the query found 20-23 "rollbacks", a different count each time.
    same_day = db.sql("SELECT count(*) FROM (SELECT vin, reading_date FROM odometer_readings "
                      "GROUP BY ALL HAVING count(DISTINCT odometer) > 1)").item()
    assert same_day > 20
    assert db.sql(query).rows() == []
    # Rows reach a window in no set order: the same readings, a day's in reverse (a temporary table of the name
    # is read before the view), must give the same answer.
    db.sql("CREATE TEMP TABLE odometer_readings AS SELECT * FROM main.odometer_readings "
           "ORDER BY vin, reading_date, record_index DESC")
    try:
        assert db.sql(query).rows() == []
    finally:
        db.sql("DROP TABLE temp.odometer_readings")


def test_the_documented_rollback_query_finds_a_true_rollback(db):
    vin = "1HGCM82633A004352"
    readings = [{"date": "2020-01-01", "odometer": 50000, "odometer_unit": "miles"},
                {"date": "2021-01-01", "odometer": 40000, "odometer_unit": "miles"},
                {"date": "2021-01-01", "odometer": 41000, "odometer_unit": "miles"}]
    report = m.HistoryReport.from_payload({"success": True, "vin": vin, "historyInformation": readings})
    db.land("history_reports", staging.history_frame([(vin, report, NOW)]), "r1")
    rows = db.sql(readme_query("-- Readings lower than an earlier one")).rows()
    assert rows == [(vin, date(2021, 1, 1), 40000, 50000)]


# -- 3. days open --------------------------------------------------------------------------------------------
def test_days_open_counts_from_the_campaigns_own_date(db):
    vin = "1HGCM82633A004352"
    db.land("vehicles", pl.DataFrame({"vin": [vin]}), "r1", fetched_at=NOW)
    db.land("recalls", pl.DataFrame([
        {"vin": vin, "nhtsa_campaign_number": "14V001000", "report_received_date": date(2014, 3, 1), "fetched_at": NOW},
        {"vin": vin, "nhtsa_campaign_number": "26V001000", "report_received_date": None, "fetched_at": NOW}]), "r1")
    rows = dict(db.sql("SELECT nhtsa_campaign_number, days_open FROM open_recalls").rows())
    assert rows == {"14V001000": (datetime.now(UTC).date() - date(2014, 3, 1)).days, "26V001000": None}
    assert db.sql("SELECT max(days_since_first_seen) FROM open_recalls").item() == 0  # what days_open used to say


# -- 8. unknown is not zero ----------------------------------------------------------------------------------
def test_a_vehicle_the_service_has_no_data_for_has_an_unknown_recall_count_and_the_files_make(sample):
    db, roster = sample
    unknown = sorted(v for v in roster["vin"] if not sandbox_data.vehicle(v).has_data)
    assert len(unknown) > 20  # the sample's vehicles the service does not know
    rows = db.sql("SELECT vin, recall_status, open_recall_count, park_now, park_now_campaigns, make, make_source "
                  "FROM vehicle_overview WHERE vin IN (SELECT unnest($v::VARCHAR[])) ORDER BY vin", {"v": unknown}).rows()
    hints = dict(roster.select("vin", "make_hint").iter_rows())
    # The batch said 0 for them, but no record stands behind that zero: unknown, and the file's make.
    assert rows == [(v, "no_data", None, None, None, hints[v], "fleet_file") for v in unknown]
    checked = db.sql("SELECT recall_status, count(*), count(open_recall_count), count(*) FILTER (WHERE make_source = 'specs') "
                     "FROM vehicle_overview WHERE vin NOT IN (SELECT unnest($v::VARCHAR[])) GROUP BY ALL ORDER BY ALL",
                     {"v": unknown}).rows()
    outside = roster.filter(~pl.col("market").is_in(["US", "CA", "MX", "north_america"])).height
    assert checked == [("checked", roster.height - len(unknown) - outside, roster.height - len(unknown) - outside,
                        roster.height - len(unknown) - outside), ("not_checked", outside, 0, outside)]


def test_a_vins_own_recall_lookup_answering_404_is_unknown_not_zero(db):
    vins = ["1HGCM82633A004352", "1FTFW1E50KFA12345"]
    db.land("vehicles", pl.DataFrame({"vin": vins}), "r1", fetched_at=NOW)
    db.land("recall_checks", staging.recall_checks_from_reports([], [(vins[0], NOW)]), "r1")  # 404 "no data"
    db.land("recall_checks", staging.recall_checks_from_batch(
        [m.BatchResultItem.model_validate({"vin": vins[1], "hasRecalls": False, "recallCount": 0})], "b1", NOW), "r1")
    rows = db.sql("SELECT vin, recall_status, open_recall_count, park_now FROM vehicle_overview ORDER BY vin").rows()
    assert rows == [(vins[1], "checked", 0, False), (vins[0], "no_data", None, None)]


# -- 9. mileage conflicts ------------------------------------------------------------------------------------
def _expected_conflicts(roster: pl.DataFrame) -> dict[str, tuple]:
    """From the sandbox's answers, in Python: the file's mileage below the last title's odometer (in the file's
    unit, miles or kilometres)."""
    out = {}
    for row in _in("history", roster).iter_rows(named=True):
        if row["mileage"] is None or not sandbox_data.vehicle(row["vin"]).has_data:
            continue
        last = sandbox_data.history(row["vin"])["historyInformation"][-1]
        odometer = last["odometer"] if row["mileage_unit"] != "km" else round(last["odometer"] * 1.609344)
        if odometer > row["mileage"]:
            out[row["vin"]] = (row["mileage"], odometer, date.fromisoformat(last["date"]), odometer - row["mileage"])
    return out


def test_mileage_conflicts_lists_the_file_mileages_below_the_latest_odometer(sample):
    db, roster = sample
    expected = _expected_conflicts(roster)
    assert len(expected) > 200  # the sample's conflicts (the issue counted 230)
    rows = db.sql("SELECT vin, file_mileage, latest_odometer, odometer_date, gap, reason FROM mileage_conflicts").rows()
    assert {v: (f, o, d, g) for v, f, o, d, g, _ in rows} == expected
    worst = max(rows, key=lambda r: r[4])
    # The reason says what the valuation was really asked with: here (landed as a valuation before the history
    # was known) the file's figure, recorded without its source.
    assert worst[5] == (f"fleet file says {worst[1]:,} mi, history read {worst[2]:,} mi on {worst[3]:%Y-%m-%d}: "
                        f"{worst[4]:,} mi more; the latest valuation ({NOW:%Y-%m-%d}) was asked with {worst[1]:,} mi")


def test_valuations_are_asked_with_the_larger_mileage(sample, tmp_path):
    db, roster = sample
    expected = _expected_conflicts(roster)
    plan = make_plan(db, RUN, ["specs", "market_value"], tmp_path, rule=DueRule(force=True))
    due = {d: pl.read_parquet(plan.datasets[d].path) for d in ("specs", "market_value")}
    assert plan.datasets["market_value"].path != plan.datasets["specs"].path  # not the file's mileages shared
    planned = {r["vin"]: r for r in due["market_value"].iter_rows(named=True)}
    for vin, (_, odometer, _, _) in expected.items():
        assert valuation_request(planned[vin])["mileage"] == odometer
    file_mileage = dict(roster.select("vin", "mileage").iter_rows())
    others = [v for v in planned if v not in expected]
    assert [planned[v]["mileage"] for v in others] == [file_mileage[v] for v in others]
    assert dict(due["specs"].select("vin", "mileage").iter_rows()) == file_mileage  # the roster as it is
    backfill_rows = db.query("roster_rows_for_vins", vins=sorted(expected))
    assert dict(backfill_rows.select("vin", "mileage").iter_rows()) == {v: e[1] for v, e in expected.items()}


def test_vehicle_mileage_reads_the_latest_of_the_readings_odometer_readings_lists(sample):
    db, _ = sample
    latest = db.sql("""SELECT vin, reading_date, odometer, unit FROM odometer_readings
                       WHERE reading_date IS NOT NULL AND odometer IS NOT NULL AND unit IS NOT NULL
                       QUALIFY row_number() OVER (PARTITION BY vin ORDER BY reading_date DESC, record_index DESC) = 1""")
    mileage = db.sql("SELECT vin, odometer_date, latest_odometer, odometer_unit FROM vehicle_mileage "
                     "WHERE latest_odometer IS NOT NULL")
    assert sorted(mileage.rows()) == sorted(latest.rows()) and mileage.height > 500


def test_a_vehicle_without_a_file_mileage_is_valued_with_its_latest_reading(db):
    vin = "1HGCM82633A004352"
    db.land("vehicles", pl.DataFrame({"vin": [vin], "mileage": [None]}, schema={"vin": pl.String, "mileage": pl.Int64}),
            "r1", fetched_at=NOW)
    readings = [{"date": "2024-01-01", "odometer": 70000, "odometer_unit": "km"},
                {"date": "2025-01-01", "odometer": 90000, "odometer_unit": "km"}]
    report = m.HistoryReport.from_payload({"success": True, "vin": vin, "historyInformation": readings})
    db.land("history_reports", staging.history_frame([(vin, report, NOW)]), "r1")
    assert db.sql("SELECT valuation_mileage, valuation_mileage_unit, valuation_mileage_source FROM vehicle_mileage").rows() == [
        (90000, "km", "history")]
    assert db.sql("SELECT count(*) FROM mileage_conflicts").item() == 0  # nothing to conflict with


# -- 6. value history from day one ---------------------------------------------------------------------------
def test_fleet_value_by_month_shows_the_six_months_the_first_valuations_carry(sample):
    db, roster = sample
    valued, by_month = [], {}  # the sandbox's answers to the fixture's requests, summed here
    for row in _in("market_value", roster).iter_rows(named=True):
        if not sandbox_data.vehicle(row["vin"]).has_data:
            continue
        valued.append(row["vin"])
        asked = valuation_request(row)
        answer = valuation.market_value_v2(row["vin"], asked["state"], asked["mileage"],
                                           valuation.parse_condition(asked["condition"]))
        for item in answer["trade_in_values"]:
            month = date.fromisoformat(item["date"][:10])
            by_month[month] = by_month.get(month, 0.0) + float(item["value"])
    this_month = NOW.date().replace(day=1)
    rows = db.sql("SELECT month, sum(vehicles), sum(trade_in_history_vehicles), sum(total_retail), sum(total_trade_in) "
                  "FROM fleet_value_by_month GROUP BY month ORDER BY month").rows()
    assert [r[0] for r in rows] == sorted(by_month) + [this_month]  # six months before the first run, then today
    assert len(rows) == 7
    for month, vehicles, from_history, retail, trade_in in rows[:-1]:
        assert (vehicles, from_history, retail) == (len(valued), len(valued), None)  # the service sends no retail then
        assert trade_in == pytest.approx(by_month[month])
    assert rows[-1][1:3] == (len(valued), 0)
    assert rows[-1][3] == pytest.approx(db.sql("SELECT sum(retail) FROM vehicle_overview").item())  # today's value
    assert rows[0][4] > rows[-2][4]  # the sandbox's trade-in values fall month by month
