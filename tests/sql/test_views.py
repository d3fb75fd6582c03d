"""The analyst views on a small hand-made fleet: rows in, rows out."""

from datetime import date, datetime, timedelta, timezone

import polars as pl
import pytest

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)
T1 = datetime(2026, 2, 5, 12, 0, tzinfo=timezone.utc)
T2 = datetime(2026, 3, 5, 12, 0, tzinfo=timezone.utc)

V1, V2, V3 = "1HGCM82633A004352", "1FTFW1E50KFA12345", "WBA3A5C51CF256651"


@pytest.fixture
def fleet(db):
    db.land(
        "vehicles",
        pl.DataFrame(
            {"vin": [V1, V2, V3], "unit_number": ["U1", "U2", "U3"], "fleet": ["North", "North", "South"]}
        ),
        "r1",
        fetched_at=T0,
    )
    db.land(
        "specs",
        pl.DataFrame(
            {
                "vin": [V1, V2],
                "year": [2003, 2019],
                "make": ["Honda", "Ford"],
                "model": ["Accord", "F-150"],
                "fetched_at": [T0, T0],
            }
        ),
        "r1",
    )
    values = [
        (V1, date(2026, 1, 5), 9000.0, T0),
        (V1, date(2026, 2, 5), 8500.0, T1),
        (V2, date(2026, 2, 5), 30000.0, T1),
        (V3, date(2026, 2, 5), 20000.0, T1),  # no specs: make/model come from the valuation
    ]
    db.land(
        "market_values",
        pl.DataFrame(
            [
                {"vin": v, "valued_on": d, "condition": "clean", "retail": r, "trade_in": r - 1000,
                 "make": "BMW" if v == V3 else None, "model": "328i" if v == V3 else None,
                 "model_year": 2012 if v == V3 else None, "fetched_at": f}  # fmt: skip
                for v, d, r, f in values
            ]
        ),
        "r1",
    )
    db.land(
        "recalls",
        pl.DataFrame(
            [
                {"vin": V1, "nhtsa_campaign_number": "24V001", "component": "AIR BAGS", "fetched_at": T1},
                {"vin": V1, "nhtsa_campaign_number": "19V500", "component": "BRAKES", "fetched_at": T0},
            ]
        ),
        "r1",
    )
    db.land(
        "recall_checks",
        pl.DataFrame(
            [
                {"vin": V1, "checked_via": "vin", "recall_count": 1, "has_recalls": True, "campaigns_listed": True,
                 "fetched_at": T1},
                {"vin": V2, "checked_via": "batch", "recall_count": 3, "has_recalls": True, "fetched_at": T1},
            ]  # fmt: skip
        ),
        "r1",
    )
    db.land(
        "history_reports",
        pl.DataFrame({"vin": [V1], "title_brands": [["Salvage"]], "brands_record_count": [1], "fetched_at": [T2]}),
        "r1",
    )
    db.land(
        "lien_theft_events",
        pl.DataFrame({"vin": [V2], "event_index": [0], "event": ["Theft"], "fetched_at": [T1]}),
        "r1",
    )
    return db


def test_vehicle_overview_one_row_per_vehicle(fleet):
    out = fleet.sql(
        "SELECT vin, unit_number, year, make, model, retail, valued_on, open_recall_count, title_brands, "
        "lien_theft_events FROM vehicle_overview ORDER BY unit_number"
    )
    assert out.rows() == [
        # 19V500 was not in the later complete check, so it is closed: one open campaign.
        # Lien/theft never answered for V1 or V3: their events are unknown, not 0.
        (V1, "U1", 2003, "Honda", "Accord", 8500.0, date(2026, 2, 5), 1, ["Salvage"], None),
        # A batch check gives only a count.
        (V2, "U2", 2019, "Ford", "F-150", 30000.0, date(2026, 2, 5), 3, None, 1),
        # Never checked for recalls: unknown, not zero.
        (V3, "U3", 2012, "BMW", "328i", 20000.0, date(2026, 2, 5), None, None, None),
    ]


def test_open_recalls(fleet):
    out = fleet.sql("SELECT vin, unit_number, fleet, make, nhtsa_campaign_number, component FROM open_recalls")
    assert out.rows() == [(V1, "U1", "North", "Honda", "24V001", "AIR BAGS")]


def test_open_recalls_say_whether_a_remedy_is_available_and_carry_the_notes(db):
    remedies = {
        "24V001000": ("Dealers will replace the air bag inflator, free of charge.", True),
        "24V002000": ("The remedy is currently under development. Owners will be notified when it is available.", False),
        "24V003000": ("Remedy not yet available.", False),
        "24V004000": ("Interim notification letters will be mailed; a second notice once parts are available.", False),
        "24V005000": (None, None),
    }
    db.land("recalls", pl.DataFrame([{"vin": V1, "nhtsa_campaign_number": c, "remedy": text,
                                      "notes": "Call the hotline." if c.endswith("1000") else None, "fetched_at": T0}
                                     for c, (text, _) in remedies.items()], schema_overrides={"remedy": pl.String}), "r1")
    rows = db.sql("SELECT nhtsa_campaign_number, remedy_available, notes FROM open_recalls ORDER BY 1").rows()
    assert rows == [(c, available, "Call the hotline." if c.endswith("1000") else None)
                    for c, (_, available) in remedies.items()]


def test_fleet_value_by_model(fleet):
    out = fleet.sql(
        "SELECT make, model, model_year, vehicles, total_retail, average_trade_in FROM fleet_value_by_model ORDER BY make"
    )
    assert out.rows() == [
        ("BMW", "328i", 2012, 1, 20000.0, 19000.0),
        ("Ford", "F-150", 2019, 1, 30000.0, 29000.0),
        ("Honda", "Accord", 2003, 1, 8500.0, 7500.0),  # latest valuation only
    ]


def test_vehicle_value_trend(fleet):
    out = fleet.sql(
        "SELECT valued_on, retail, previous_retail, retail_change, retail_change_pct FROM vehicle_value_trend "
        "WHERE vin = $vin ORDER BY valued_on",
        {"vin": V1},
    )
    assert out.rows() == [
        (date(2026, 1, 5), 9000.0, None, None, None),
        (date(2026, 2, 5), 8500.0, 9000.0, -500.0, -5.56),
    ]


def test_views_are_documented(db):
    from fleet_data.tasks.store.database import SQL_DIR

    readme = (SQL_DIR / "README.md").read_text()
    views = db.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'")["view_name"]
    assert {"vehicle_overview", "lien_theft_records", "odometer_readings"} <= set(views)
    for view in views:
        assert f"### `{view}`" in readme, view
    for macro in ("iso_day", "service_date", "vin_bucket"):
        assert f"`{macro}(" in readme, macro
    for migration in sorted((SQL_DIR / "migrations").glob("*.sql")):
        for line in migration.read_text().splitlines():
            if line.startswith("CREATE TABLE "):
                name = line.split()[2]
                assert f"`{name}`" in readme, name


def test_value_history_is_kept_as_observed_and_a_drop_shows_as_such(db):
    """Issue 26: each answer restates the six months before it on its own scale; a 30% drop rescaled the past."""
    from fleet_data.connectors import models as m
    from fleet_data.connectors.sandbox import valuation
    from fleet_data.tasks.land.landing import land_enrichment
    from fleet_data.tasks.staging.chunk import ChunkResult

    now = datetime.now(timezone.utc)
    asked = {"state": "TX", "mileage": 40000, "mileage_unit": "mi", "condition": "clean", "mileage_source": "fleet_file"}
    db.land("vehicles", pl.DataFrame({"vin": [V1], "unit_number": ["U1"]}), "r1")
    for run, factor, at in (("r1", 1.0, now - timedelta(hours=2)), ("r2", 0.7, now)):
        body = valuation.market_value_v2(V1, "TX", 40000, "clean", factor)
        answer = m.MarketValue.from_payload({"success": True, **body})
        land_enrichment(db, run, ChunkResult("market_value", found=[(V1, answer, at)], requests={V1: asked}))
    first, second = (valuation.market_value_v2(V1, "TX", 40000, "clean", f) for f in (1.0, 0.7))
    # Both answers' months are kept, each with when it was observed.
    assert db.sql("SELECT count(*), count(DISTINCT month), count(DISTINCT fetched_at) FROM trade_in_history").row(0) == (
        12, 6, 2)
    oldest = first["trade_in_values"][0]
    month = date.fromisoformat(oldest["date"][:10])
    row = db.sql("SELECT trade_in, latest_trade_in, observations, first_run_id FROM trade_in_by_month "
                 "WHERE vin = $v AND month = $m", {"v": V1, "m": month}).row(0)
    assert row == (float(oldest["value"]), float(second["trade_in_values"][0]["value"]), 2, "r1")
    # Over six months, as first observed: the drop the service reports, not the past rescaled by the latest answer.
    change = db.sql("SELECT trade_in_then, trade_in_now, change_pct, same_request FROM vehicle_value_change "
                    "WHERE vin = $v AND months = 6", {"v": V1}).row(0)
    assert change[:2] == (float(oldest["value"]), float(second["trade_in"]))
    assert float(change[2]) == pytest.approx(100 * (0.7 / 1.06 - 1), abs=0.5) and change[3] is True
    rescaled = 100 * (second["trade_in"] / float(second["trade_in_values"][0]["value"]) - 1)
    assert rescaled == pytest.approx(-5.7, abs=0.3)  # what a history overwritten by the latest answer said
