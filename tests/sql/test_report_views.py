"""The report's views: fleet value by month (carried forward), units by month. Rows in, rows out."""

from __future__ import annotations

from datetime import UTC, date, datetime

import polars as pl

V1, V2, V3, OFF_ROSTER = "1HGCM82633A004352", "1FTFW1E50KFA12345", "WBA3A5C51CF256651", "2T1BURHE0JC034461"


def at(month: int, day: int = 5) -> datetime:
    return datetime(2026, month, day, 12, 0, tzinfo=UTC)


def months_until_now(first: date) -> list[date]:
    today = datetime.now(UTC).date()
    months, m = [], first
    while m <= today.replace(day=1):
        months.append(m)
        m = date(m.year + m.month // 12, m.month % 12 + 1, 1)
    return months


def land_fleet(db) -> None:
    db.land("vehicles", pl.DataFrame({"vin": [V1, V2, V3], "fleet": ["North", "North", "South"]}), "r1", fetched_at=at(1))
    db.land("specs", pl.DataFrame({"vin": [V1, V2], "make": ["Honda", "Ford"], "fetched_at": [at(1), at(1)]}), "r1")
    values = [
        (V1, at(1, 3), 9100.0), (V1, at(1, 20), 9000.0),  # the month's last valuation counts
        (V1, at(2), 8500.0), (V2, at(2), 30000.0), (V3, at(2), 20000.0),
        (V1, at(4), 8000.0),  # March had no refresh: February's values carry forward
        (OFF_ROSTER, at(2), 99999.0),  # valued by a backfill, not on the roster: not the fleet's
    ]
    db.land("market_values", pl.DataFrame([
        {"vin": v, "valued_on": t.date(), "retail": r, "trade_in": r - 1000, "make": "BMW" if v == V3 else "Toyota",
         "fetched_at": t} for v, t, r in values]), "r1")


def test_fleet_value_by_month_carries_each_vehicles_last_value_forward_by_make_and_depot(db):
    land_fleet(db)
    rows = db.sql("SELECT month, make, fleet, vehicles, valued_in_month, total_retail, total_trade_in "
                  "FROM fleet_value_by_month ORDER BY month, make").rows()
    by_month: dict[date, list[tuple]] = {}
    for month, *rest in rows:
        by_month.setdefault(month, []).append(tuple(rest))
    feb = [("BMW", "South", 1, 1, 20000.0, 19000.0), ("Ford", "North", 1, 1, 30000.0, 29000.0),
           ("Honda", "North", 1, 1, 8500.0, 7500.0)]
    carried = [(make, fleet, n, 0, retail, trade) for make, fleet, n, _, retail, trade in feb]
    april = [carried[0], carried[1], ("Honda", "North", 1, 1, 8000.0, 7000.0)]
    expected = {date(2026, 1, 1): [("Honda", "North", 1, 1, 9000.0, 8000.0)], date(2026, 2, 1): feb,
                date(2026, 3, 1): carried, date(2026, 4, 1): april}
    months = months_until_now(date(2026, 1, 1))
    for later in months[4:]:  # up to this month, whose figures are today's value
        expected[later] = [(make, fleet, n, 0, retail, trade) for make, fleet, n, _, retail, trade in april]
    assert by_month == expected
    today = db.sql("SELECT sum(retail) FROM vehicle_overview").item()
    assert db.sql("SELECT sum(total_retail) FROM fleet_value_by_month WHERE month = $m", {"m": months[-1]}).item() == today


def test_fleet_value_by_month_is_empty_without_valuations(db):
    db.land("vehicles", pl.DataFrame({"vin": [V1], "fleet": ["North"]}), "r1", fetched_at=at(1))
    assert db.sql("SELECT * FROM fleet_value_by_month").height == 0


def test_units_by_month_counts_calls_units_failures_and_no_data_per_utc_month(db):
    calls = [
        ("c1", "/specs", 200, 1, datetime(2026, 1, 31, 23, 30, tzinfo=UTC), None),
        ("c2", "/specs", 404, 0, datetime(2026, 2, 1, 0, 30, tzinfo=UTC), "NotFoundError"),  # no data
        ("c3", "/specs", 503, 0, datetime(2026, 2, 2, tzinfo=UTC), "ServiceUnavailableError"),
        ("c4", "/specs", None, None, datetime(2026, 2, 2, tzinfo=UTC), "TimeoutError"),
        ("c5", "/v1/recalls-batch/submit", 200, 40, datetime(2026, 2, 3, tzinfo=UTC), None),
    ]
    db.land("api_calls", pl.DataFrame(
        [{"call_id": c, "endpoint": e, "status": s, "units": u, "fetched_at": t, "error_message": m}
         for c, e, s, u, t, m in calls],
        schema={"call_id": pl.String, "endpoint": pl.String, "status": pl.Int32, "units": pl.Int32,
                "fetched_at": pl.Datetime("us", "UTC"), "error_message": pl.String}), "r1")
    rows = db.sql("SELECT month, endpoint, calls, units, failed_calls, no_data_calls FROM units_by_month ORDER BY ALL").rows()
    assert rows == [
        (date(2026, 1, 1), "/specs", 1, 1, 0, 0),
        (date(2026, 2, 1), "/specs", 3, 0, 2, 1),
        (date(2026, 2, 1), "/v1/recalls-batch/submit", 1, 40, 0, 0),
    ]


def test_the_headline_says_unknown_not_zero_for_what_was_never_asked(db):
    """Issue 26: a fleet never checked for liens, thefts, title brands or recalls has no "0 stolen" to show."""
    import re

    from fleet_data.tasks.outputs.report import build_report

    db.land("vehicles", pl.DataFrame({"vin": [V1, V2]}), "r1", fetched_at=at(1))
    db.land("market_values", pl.DataFrame([{"vin": V1, "retail": 9000.0, "trade_in": 8000.0, "fetched_at": at(1)}]), "r1")
    figures = ("open_recalls", "vehicles_with_open_recalls", "vehicles_to_park", "likely_to_park", "stolen_vehicles",
               "active_lien_vehicles", "title_branded_vehicles")
    headline = db.query("report_headline").row(0, named=True)
    assert {k: headline[k] for k in figures} == dict.fromkeys(figures)
    assert (headline["vehicles"], headline["valued_vehicles"], headline["lien_theft_checked"]) == (2, 1, 0)
    page, _ = build_report(db, "fleet.duckdb")
    shown = dict(re.findall(r'id="([a-z-]+)" data-value="([^"]*)"', page))
    assert [shown[k] for k in ("open-recalls", "park-now", "park-outside", "stolen-now", "active-liens",
                               "new-title-brands", "title-branded")] == [""] * 7
    # One vehicle answered lien/theft with nothing on record: now a zero is known, for the one vehicle checked.
    db.land("fetch_status", pl.DataFrame([{"vin": V2, "dataset": "lien_theft", "outcome": "no_data",
                                           "fetched_at": at(2)}]), "r2")
    headline = db.query("report_headline").row(0, named=True)
    assert (headline["stolen_vehicles"], headline["active_lien_vehicles"], headline["lien_theft_checked"]) == (0, 0, 1)
    assert "(of 1 checked)" in build_report(db, "fleet.duckdb")[0]
