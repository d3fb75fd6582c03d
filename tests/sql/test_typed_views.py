"""Typed analyst views: lien/theft events, history records and odometer readings, service dates, park now.

Answers go through the real models and staging frames (what a refresh lands), in the sandbox's shapes
and in the shapes the vendor documents for the real service, odd cases included.
"""

from datetime import UTC, date, datetime

import polars as pl
import pytest

from fleet_data.connectors import models as m
from fleet_data.connectors.sandbox import vehicles as sandbox_data
from fleet_data.tasks.land import frames as staging

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
T1 = datetime(2026, 2, 5, 12, 0, tzinfo=UTC)

VA, VB, VC, VD, VE, VF, VG = (f"1HGCM82633A00{n:04d}" for n in range(1, 8))


def roster(db, vins):
    db.land("vehicles", pl.DataFrame({"vin": list(vins), "unit_number": [f"U{i}" for i in range(len(vins))]}), "r1",
            fetched_at=T0)


def land_lien_theft(db, answers, at=T0):
    """Lands `/v1/lien-theft` bodies as a refresh does: events plus the VIN's answer in fetch_status."""
    fetched = [(vin, m.LienTheftResult.from_payload({"success": True, "year": 2019, **body}), at)
               for vin, body in answers.items()]
    answered = pl.DataFrame([{"vin": vin, "dataset": "lien_theft", "outcome": "found", "fetched_at": at}
                             for vin in answers])
    db.land_chunk({"lien_theft_events": staging.lien_theft_frame(fetched), "fetch_status": answered}, "r1")


def ev(event, *details, location="TX"):
    return {"event": event, "location": location, "details_list": list(details)}


LIEN_THEFT = {
    # The sandbox's shapes: "Date: YYYY-MM-DD", "Lienholder: ...", "Agency: ...".
    VA: {"events": [
        ev("Lien", "Date: 2022-01-02", "Lienholder: Sandbox Credit Union"),
        ev("Lien", "Date: 2023-05-06", "Lienholder: Test Bank N.A."),
        ev("Lien Release", "Date: 2022-06-30", "Lienholder: sandbox credit union "),  # releases the first lien
        ev("Lien Release", "Date: 2020-01-01", "Lienholder: Test Bank N.A."),  # before the lien: an older one's
    ]},
    VB: {"events": [
        ev("Theft", "Date: ", "Agency: TX State Police"),  # empty date: recovered or not, we cannot tell
        ev("Recovery", "Date: 2021-03-04", "Agency: TX State Police"),
    ]},
    VC: {"events": [
        ev("Theft", "Agency: OH State Police"),  # no date at all, and no recovery: still stolen
        ev("Lien", "Date: not a date", "Lienholder: Example Auto Finance"),
        ev("Lien Release", "Lienholder: Example Auto Finance"),  # undated: released or not, we cannot tell
    ]},
    # The real service's documented shapes: "Open Lien" with its derived text, MM/DD/YYYY dates.
    VD: {"events": [
        ev("Open Lien", "Vehicle is reported to have an open lien on title: ACME BANK", "Date: 01/02/2022",
           location="CA"),
        ev("Recovered Theft", "The vehicle is reported to be an Recovered Theft.", location="OH"),
        ev("Exported", "Date: 12/31/2020", "Vehicle is reported to have been exported out of the United States"),
        ev("Lien", "Date: 2022-13-45", "Lienholder: "),  # impossible date, empty lienholder
    ]},
    VE: {"events": [
        ev("Active Theft", "The vehicle is reported to be an active theft.", "Date: 2024-02-01T00:00:00.000Z"),
        ev("Recovery", "Date: 2023-01-01"),  # recovered before this theft: an earlier one
        ev("Lien", "Date: 2023-03-03", "Lienholder: Test Bank"),
        ev("Lien Release", "Date: 2023-03-03", "Lienholder: TEST BANK"),  # the same day counts as after
    ]},
    VF: {"events": []},  # answered: nothing on record
}


@pytest.fixture
def liens(db):
    roster(db, [VA, VB, VC, VD, VE, VF, VG])  # VG: never asked
    land_lien_theft(db, LIEN_THEFT)
    return db


def test_lien_theft_events_as_typed_columns(liens):
    rows = liens.sql(
        "SELECT vin, event_index, event_kind, event_date, lienholder, agency, active, stolen_not_recovered "
        "FROM lien_theft_records ORDER BY vin, event_index").rows()
    assert rows == [
        (VA, 0, "lien", date(2022, 1, 2), "Sandbox Credit Union", None, False, None),
        (VA, 1, "lien", date(2023, 5, 6), "Test Bank N.A.", None, True, None),
        (VA, 2, "lien_release", date(2022, 6, 30), "sandbox credit union", None, False, None),
        (VA, 3, "lien_release", date(2020, 1, 1), "Test Bank N.A.", None, False, None),
        (VB, 0, "theft", None, None, "TX State Police", None, None),
        (VB, 1, "theft_recovery", date(2021, 3, 4), None, "TX State Police", None, False),
        (VC, 0, "theft", None, None, "OH State Police", None, True),
        (VC, 1, "lien", None, "Example Auto Finance", None, None, None),
        (VC, 2, "lien_release", None, "Example Auto Finance", None, False, None),
        (VD, 0, "lien", date(2022, 1, 2), "ACME BANK", None, True, None),
        (VD, 1, "theft_recovery", None, None, None, None, False),
        (VD, 2, "other", date(2020, 12, 31), None, None, None, None),
        (VD, 3, "lien", None, None, None, True, None),
        (VE, 0, "theft", date(2024, 2, 1), None, None, None, True),
        (VE, 1, "theft_recovery", date(2023, 1, 1), None, None, None, False),
        (VE, 2, "lien", date(2023, 3, 3), "Test Bank", None, False, None),
        (VE, 3, "lien_release", date(2023, 3, 3), "TEST BANK", None, False, None),
    ]
    # The stored strings are kept as they came.
    raw = liens.sql("SELECT event, location, details_list FROM lien_theft_records WHERE vin = $v AND event_index = 0",
                    {"v": VD}).row(0)
    assert raw == ("Open Lien", "CA", ["Vehicle is reported to have an open lien on title: ACME BANK",
                                       "Date: 01/02/2022"])


def test_vehicle_overview_sums_up_liens_and_thefts(liens):
    rows = liens.sql("SELECT vin, lien_theft_events, active_liens, active_lienholders, stolen_not_recovered "
                     "FROM vehicle_overview ORDER BY vin").rows()
    assert rows == [
        (VA, 4, 1, ["Test Bank N.A."], False),
        (VB, 2, 0, None, None),  # a theft whose recovery cannot be dated against it
        (VC, 3, 0, None, True),  # its lien's release is undated: not counted as active
        (VD, 4, 2, ["ACME BANK"], False),  # the holder-less lien counts, and has no name to list
        (VE, 4, 0, None, True),
        (VF, 0, 0, None, False),  # answered, nothing on record
        (VG, None, None, None, None),  # never asked: unknown, its events too (not 0)
    ]


def test_every_sandbox_lien_theft_answer_types_cleanly(db):
    """The sandbox's answers for 300 VINs: every date and lienholder it sends is read, none is lost."""
    vins = [sandbox_data.synthetic_vin(f"lien-{i}") for i in range(300)]
    answers = {vin: body for vin in vins if (body := sandbox_data.lien_theft(vin))}
    assert len(answers) > 100
    land_lien_theft(db, answers)
    total, dated, unnamed_liens, kinds = db.sql(
        "SELECT count(*), count(event_date), count(*) FILTER (WHERE event_kind LIKE 'lien%' AND lienholder IS NULL), "
        "list(DISTINCT event_kind ORDER BY event_kind) FROM lien_theft_records").row(0)
    assert total == sum(len(b["events"]) for b in answers.values())
    assert dated == total and unnamed_liens == 0
    assert kinds == ["lien", "lien_release", "theft", "theft_recovery"]
    texts = db.sql("SELECT list_filter(details_list, lambda d: d LIKE 'Date: %')[1] AS text, event_date "
                   "FROM lien_theft_records").rows()
    assert all(text == f"Date: {when.isoformat()}" for text, when in texts)


def land_history(db, answers, at=T0):
    fetched = [(vin, m.HistoryReport.from_payload({"success": True, "vin": vin, **body}), at)
               for vin, body in answers.items()]
    db.land("history_reports", staging.history_frame(fetched), "r1")


TITLE_2021 = {"date": "2021-05-06", "state": "TX", "odometer": "42,000", "odometer_unit": "miles",
              "title_number": "T2", "event": "Title issued"}
HISTORY = {
    VA: {
        "historyInformation": [
            {"date": "2019-03-04", "state": "TX", "odometer": 15000, "odometer_unit": "miles",
             "title_number": "T1", "event": "First title issued"},
            TITLE_2021,
            {"date": "", "state": "OK", "odometer": "EXEMPT", "event": "Title issued"},  # no number, no date
        ],
        "currentTitleInformation": [TITLE_2021],  # the same reading again: listed once
        "brandsInformation": [{"brand_code": "SALVAGE", "brand_name": "Salvage", "date": "2021-05-06",
                               "state": "TX"}],
        "insuranceInformation": [{"VehicleObtainedDate": "2016-12-06T00:00:00.000Z",
                                  "VehicleDispositionText": "TO BE DETERMINED"}],
    },
    VB: {"historyInformation": [{"date": "05/06/2020", "odometer": 1000.4, "odometer_unit": "KM"},
                                {"date": "2020-07-01", "odometer": 1800, "odometer_unit": "furlongs"},
                                {"date": "2020-09-01", "odometer": 2500}]},
}


def test_odometer_readings_typed(db):
    land_history(db, HISTORY)
    rows = db.sql("SELECT vin, reading_date, odometer, unit, source, odometer_reported "
                  "FROM odometer_readings ORDER BY vin, reading_date NULLS LAST").rows()
    assert rows == [
        (VA, date(2019, 3, 4), 15000, "mi", "history_information", "15000"),
        (VA, date(2021, 5, 6), 42000, "mi", "history_information", "42,000"),
        (VA, None, None, None, "history_information", "EXEMPT"),
        (VB, date(2020, 5, 6), 1000, "km", "history_information", "1000.4"),
        (VB, date(2020, 7, 1), 1800, None, "history_information", "1800"),  # a unit we do not know: NULL
        (VB, date(2020, 9, 1), 2500, None, "history_information", "2500"),  # no unit given: NULL, not a guess
    ]
    assert db.sql("SELECT typeof(reading_date), typeof(odometer) FROM odometer_readings LIMIT 1").row(0) == (
        "DATE", "BIGINT")


def test_history_records_carry_typed_dates(db):
    land_history(db, HISTORY)
    rows = db.sql("SELECT source, record_index, record_date, state, description FROM history_records "
                  "WHERE vin = $v ORDER BY source, record_index", {"v": VA}).rows()
    assert rows == [
        ("brands_information", 0, date(2021, 5, 6), "TX", "Salvage"),
        ("current_title_information", 0, date(2021, 5, 6), "TX", "Title issued"),
        ("history_information", 0, date(2019, 3, 4), "TX", "First title issued"),
        ("history_information", 1, date(2021, 5, 6), "TX", "Title issued"),
        ("history_information", 2, None, "OK", "Title issued"),
        ("insurance_information", 0, date(2016, 12, 6), None, "TO BE DETERMINED"),
    ]


def test_every_sandbox_history_reading_is_typed(db):
    vins = [sandbox_data.synthetic_vin(f"history-{i}") for i in range(200)]
    answers = {vin: sandbox_data.history(vin) for vin in vins}
    land_history(db, answers)
    titles = {(vin, t["date"], t["odometer"]) for vin, body in answers.items() for t in body["historyInformation"]}
    readings = db.sql("SELECT vin, strftime(reading_date, '%Y-%m-%d'), odometer, unit FROM odometer_readings").rows()
    assert {(v, d, o) for v, d, o, _ in readings} == titles
    assert {u for *_, u in readings} == {"mi"}
    assert len(readings) == len(titles)  # the current title repeats the last reading: listed once


def test_market_value_dates_typed(db):
    def auction(span):
        return {"low_auction_value": 1.0, "average_auction_value": 2.0, "high_auction_value": 3.0, "date_range": span}

    db.land("market_values", pl.DataFrame([
        {"vin": VA, "valued_on": date(2026, 2, 5), "publish_date": date(2026, 2, 1),
         "auction_values": auction("2025-11-07 to 2026-02-05"), "fetched_at": T1},
        # A publish_date that is no date is NULL from the staging on (tests/tasks/test_staging.py).
        {"vin": VB, "valued_on": date(2026, 2, 5), "publish_date": None,
         "auction_values": auction("last quarter"), "fetched_at": T1},
    ]), "r1")
    rows = db.sql("SELECT vin, publish_date, published_on, auction_from, auction_to FROM latest_market_values "
                  "ORDER BY vin").rows()
    assert rows == [(VA, date(2026, 2, 1), date(2026, 2, 1), date(2025, 11, 7), date(2026, 2, 5)),
                    (VB, None, None, None, None)]
    trend = db.sql("SELECT published_on FROM vehicle_value_trend WHERE vin = $v", {"v": VA}).item()
    assert trend == date(2026, 2, 1)


def recall(vin, number, at, *, park_it=False, park_outside=False, matched_by="vin"):
    return {"vin": vin, "nhtsa_campaign_number": number, "park_it": park_it, "park_outside": park_outside,
            "matched_by": matched_by, "fetched_at": at}


def check(vin, via, at, count=None, listed=True):
    return {"vin": vin, "checked_via": via, "recall_count": count, "has_recalls": bool(count),
            "campaigns_listed": listed, "fetched_at": at}


def test_park_now_flag(db):
    vins = [VA, VB, VC, VD, VE, VF, VG]
    roster(db, vins)
    db.land("recalls", pl.DataFrame([
        recall(VA, "24V100", T0, park_it=True),
        recall(VA, "24V101", T0),
        recall(VB, "24V200", T0, park_outside=True),  # closed by VB's later complete check below
        recall(VD, "24V400", T0, park_it=True, matched_by="model"),  # the model's list: likely, not confirmed
        recall(VF, "24V600", T0),
    ]), "r1")
    db.land("recall_checks", pl.DataFrame([
        check(VA, "vin", T0, 2),
        check(VB, "vin", T0, 1),
        check(VB, "vin", T1, 0),
        check(VC, "batch", T0, 2, listed=False),  # a count, no campaigns yet: cannot tell
        check(VD, "model", T0, 1),
        check(VE, "batch", T0, 0),
        check(VF, "vin", T0, 1),
    ]), "r1")
    rows = db.sql("SELECT vin, park_now, park_now_campaigns, park_now_likely FROM vehicle_overview ORDER BY vin").rows()
    assert rows == [
        (VA, True, ["24V100"], False),
        (VB, False, [], False),
        (VC, None, [], False),
        (VD, None, [], True),
        (VE, False, [], False),
        (VF, False, [], False),
        (VG, None, None, None),  # never checked
    ]
