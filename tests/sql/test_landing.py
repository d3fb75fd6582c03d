"""Landing is an idempotent upsert per table: small frames in, exact table contents out."""

from datetime import date, datetime, timezone

import polars as pl
import pyarrow as pa
import pytest

from fleet_data.tasks.ingest.fleet_files import read_fleet
from fleet_data.tasks.store.database import DatabaseError, LANDING_TABLES

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)
T1 = datetime(2026, 2, 5, 12, 0, tzinfo=timezone.utc)
T2 = datetime(2026, 3, 5, 12, 0, tzinfo=timezone.utc)


def table(db, name: str, order: str):
    # `name`/`order` come from the test itself, never from input.
    return db.sql(f"SELECT * FROM {name} ORDER BY {order}")

V1, V2, V3 = "1HGCM82633A004352", "1FTFW1E50KFA12345", "WBA3A5C51CF256651"


def utc(*args):
    return datetime(*args, tzinfo=timezone.utc)


def specs_frame(fetched_at=T0, make="Honda"):
    return pl.DataFrame(
        {
            "vin": [V1],
            "year": [2003],
            "make": [make],
            "model": ["Accord"],
            "doors": [4],
            "engine_cylinders": [None],
            "colors": [[{"category": "Exterior", "name": "Blue"}]],
            "equipment": [[{"name": "abs_brakes", "value": "Std."}]],
            "warranties": [[{"type": "Basic", "miles": 36000, "months": 36}]],
            "is_international": [False],
            "fetched_at": [fetched_at],
        }
    )


def test_every_landing_table_has_its_sql():
    from fleet_data.tasks.store.database import SQL_DIR

    for name in LANDING_TABLES:
        assert (SQL_DIR / "landing" / f"{name}.sql").is_file(), name


def test_landing_twice_changes_nothing(db):
    result = read_fleet(["data/sample_fleet.csv"])
    run = db.start_run("refresh", ["data/sample_fleet.csv"], started_at=T0)
    for _ in range(2):
        db.land("vehicles", result.roster, run)
        db.land("rejected_rows", result.rejected, run)
        db.land("specs", specs_frame(), run)
    vehicles = table(db, "vehicles", "vin")
    assert vehicles.height == result.roster.height
    assert set(vehicles["run_id"]) == {run}
    assert vehicles["fetched_at"].unique().to_list() == [T0]  # the run's start, not the landing clock
    assert table(db, "rejected_rows", "source_row").height == result.rejected.height
    before = {name: table(db, name, "1") for name in ("vehicles", "rejected_rows", "specs")}
    db.land("vehicles", result.roster, run)
    db.land("rejected_rows", result.rejected, run)
    db.land("specs", specs_frame(), run)
    for name, frame in before.items():
        assert table(db, name, "1").sort(pl.all()).equals(frame.sort(pl.all())), name


def test_vehicles_keep_other_columns_and_first_seen(db):
    result = read_fleet(["data/sample_fleet.csv"])
    first = db.start_run(started_at=T0)
    db.land("vehicles", result.roster.head(3), first)
    second = db.start_run(started_at=T1)
    db.land("vehicles", result.roster.head(3).with_columns(pl.lit("Moved").alias("fleet")), second)
    row = db.sql("SELECT * FROM vehicles ORDER BY source_row LIMIT 1").to_dicts()[0]
    assert row["fleet"] == "Moved" and row["run_id"] == second
    assert row["first_seen_run_id"] == first and row["first_seen_at"] == T0
    assert db.sql("SELECT extra->>'make_hint' AS make FROM vehicles ORDER BY source_row LIMIT 1")["make"].item()


def test_nested_specs_are_queryable(db):
    db.land("specs", specs_frame(), "r1")
    out = db.sql(
        "SELECT year, colors[1].name AS color, equipment[1].value AS abs, warranties[1].miles AS miles FROM specs"
    )
    assert out.rows() == [(2003, "Blue", "Std.", 36000)]
    assert str(db.sql("SELECT typeof(colors) AS t FROM specs")["t"].item()).startswith("STRUCT")


def test_specs_latest_wins_even_when_landed_late(db):
    db.land("specs", specs_frame(T1, "Newer"), "r2")
    db.land("specs", specs_frame(T0, "Older"), "r1")
    assert db.sql("SELECT make, run_id FROM specs").rows() == [("Newer", "r2")]


def test_arrow_tables_land_too(db):
    db.land("specs", specs_frame().to_arrow(), "r1")
    assert db.sql("SELECT vin FROM specs")["vin"].to_list() == [V1]


def test_a_landing_bigger_than_a_row_group_lands_every_row(db):
    # DuckDB 2.0.0 read back none of 122,880+ rows staged in a table made by CREATE ... AS ... LIMIT 0
    # inside a transaction: a million-VIN roster landed 0 vehicles, without an error.
    rows = 130_000
    recall_checks = pl.DataFrame({"vin": [f"VIN{i:014d}" for i in range(rows)], "has_recalls": [i % 3 == 0 for i in range(rows)],
                                  "recall_count": [i % 3 for i in range(rows)], "checked_via": ["batch"] * rows})
    assert db.land("recall_checks", recall_checks, "big") == rows
    assert db.sql("SELECT count(*) AS n, count(DISTINCT vin) AS vins, sum(recall_count) AS total FROM recall_checks").rows() == [
        (rows, rows, sum(i % 3 for i in range(rows)))]


def test_unknown_table_or_column_is_refused(db):
    with pytest.raises(DatabaseError, match="cannot land into"):
        db.land("vehicles; DROP TABLE runs", pl.DataFrame({"vin": [V1]}), "r")
    with pytest.raises(DatabaseError, match="no column"):
        db.land("specs", pl.DataFrame({"vin": [V1], "colour": ["red"]}), "r")


def test_failed_landing_rolls_back_the_chunk(db):
    bad = specs_frame().vstack(specs_frame().with_columns(pl.lit(None, pl.String).alias("vin")))
    with pytest.raises(DatabaseError):
        db.land("specs", bad, "r1")
    assert db.sql("SELECT count(*) AS n FROM specs")["n"].item() == 0


def market_value(valued_on, retail, fetched_at, condition="clean"):
    return {
        "vin": V1, "valued_on": valued_on, "state": "CA", "mileage": 50000, "condition": condition,
        "model_year": 2003, "make": "Honda", "model": "Accord", "retail": retail, "trade_in": retail * 0.8,
        "valuation_groups": [{"kind": "retail", "tier": "clean", "base": retail, "mileage": -100.0,
                              "add_deduct": 0.0, "regional": 50.0, "adjusted": retail - 50}],
        "auction_values": {"low_auction_value": 1.0, "average_auction_value": 2.0, "high_auction_value": 3.0,
                           "date_range": "2026-01"},
        "fetched_at": fetched_at,
    }  # fmt: skip


def test_market_values_are_a_history(db):
    rows = [market_value(date(2026, 1, 5), 9000.0, T0), market_value(date(2026, 2, 5), 8500.0, T1)]
    db.land("market_values", pl.DataFrame(rows), "r1")
    db.land("market_values", pl.DataFrame(rows), "r1")
    # Same VIN, day and request fetched again later that day: replaced, not duplicated.
    db.land("market_values", pl.DataFrame([market_value(date(2026, 2, 5), 8400.0, utc(2026, 2, 5, 18))]), "r2")
    # Without valued_on the UTC fetch date is used.
    no_date = market_value(None, 8000.0, T2)
    db.land("market_values", pl.DataFrame([no_date]), "r3")
    out = db.sql("SELECT valued_on, retail, run_id, valuation_groups[1].adjusted AS adj, "
                 "auction_values.high_auction_value AS high FROM market_values ORDER BY valued_on")  # fmt: skip
    assert out.rows() == [
        (date(2026, 1, 5), 9000.0, "r1", 8950.0, 3.0),
        (date(2026, 2, 5), 8400.0, "r2", 8350.0, 3.0),
        (date(2026, 3, 5), 8000.0, "r3", 7950.0, 3.0),
    ]


def recall(campaign, fetched_at, vin=V1, component="BRAKES"):
    return {"vin": vin, "nhtsa_campaign_number": campaign, "component": component, "park_it": False,
            "report_received_date": date(2025, 6, 1), "fetched_at": fetched_at}  # fmt: skip


def check(vin, fetched_at, count, listed=True, via="vin"):
    return {"vin": vin, "checked_via": via, "has_recalls": count > 0, "recall_count": count,
            "campaigns_listed": listed, "fetched_at": fetched_at}  # fmt: skip


def test_recalls_first_last_seen_and_closed(db):
    # Check 1 lists A and B.
    db.land("recalls", pl.DataFrame([recall("24V001", T0), recall("24V002", T0)]), "r1")
    db.land("recall_checks", pl.DataFrame([check(V1, T0, 2)]), "r1")
    # Check 2 lists only B: A is closed at check 2.
    db.land("recall_checks", pl.DataFrame([check(V1, T1, 1)]), "r2")
    db.land("recalls", pl.DataFrame([recall("24V002", T1)]), "r2")
    # A batch check (count only) closes nothing.
    db.land("recall_checks", pl.DataFrame([check(V1, T2, 1, listed=False, via="batch")]), "r3")
    out = db.sql(
        "SELECT nhtsa_campaign_number, first_seen_at, last_seen_at, closed_at, first_seen_run_id, run_id "
        "FROM recalls ORDER BY 1"
    )
    assert out.rows() == [
        ("24V001", T0, T0, T1, "r1", "r1"),
        ("24V002", T0, T1, None, "r1", "r2"),
    ]
    # Landing the same chunks again changes nothing.
    before = table(db, "recalls", "1")
    db.land("recall_checks", pl.DataFrame([check(V1, T1, 1)]), "r2")
    db.land("recalls", pl.DataFrame([recall("24V002", T1)]), "r2")
    assert table(db, "recalls", "1").equals(before)
    # A campaign seen again after closing reopens.
    db.land("recalls", pl.DataFrame([recall("24V001", T2)]), "r4")
    db.land("recall_checks", pl.DataFrame([check(V1, T2, 2)]), "r4")
    reopened = db.sql("SELECT closed_at, last_seen_at FROM recalls WHERE nhtsa_campaign_number = '24V001'")
    assert reopened.rows() == [(None, T2)]
    assert db.sql("SELECT count(*) AS n FROM recall_checks")["n"].item() == 4


def test_check_with_no_campaigns_closes_all(db):
    db.land("recalls", pl.DataFrame([recall("24V001", T0)]), "r1")
    db.land("recall_checks", pl.DataFrame([check(V1, T0, 1)]), "r1")
    db.land("recall_checks", pl.DataFrame([check(V1, T1, 0)]), "r2")
    assert db.sql("SELECT closed_at FROM recalls")["closed_at"].to_list() == [T1]


def test_a_model_list_never_downgrades_or_closes_a_campaign_confirmed_for_the_vin(db):
    # The VIN's own lookup confirmed A (park outside) and B.
    db.land("recalls", pl.DataFrame([{**recall("24V001", T0), "park_outside": True}, recall("24V002", T0)]), "r1")
    db.land("recall_checks", pl.DataFrame([check(V1, T0, 2)]), "r1")
    # A cheaper run matches by model: its list names A and C, not B.
    model_rows = [{**recall("24V001", T1), "park_outside": True, "matched_by": "model"},
                  {**recall("24V003", T1), "matched_by": "model"}]
    db.land("recalls", pl.DataFrame(model_rows), "r2")
    db.land("recall_checks", pl.DataFrame([check(V1, T1, 2, via="model")]), "r2")
    rows = db.sql("SELECT nhtsa_campaign_number, matched_by, closed_at FROM recalls ORDER BY 1").rows()
    assert rows == [("24V001", "vin", None), ("24V002", "vin", None), ("24V003", "model", None)]
    assert db.sql("SELECT vin, matched_by FROM open_recalls WHERE park_outside").rows() == [(V1, "vin")]
    # Landing the model's list again, or a later model list without C: C (only likely) closes, A and B stay.
    db.land("recalls", pl.DataFrame(model_rows[:1]), "r3")
    db.land("recalls", pl.DataFrame([{**model_rows[0], "fetched_at": T2}]), "r3")
    db.land("recall_checks", pl.DataFrame([check(V1, T2, 1, via="model")]), "r3")
    rows = db.sql("SELECT nhtsa_campaign_number, matched_by, closed_at FROM recalls ORDER BY 1").rows()
    assert rows == [("24V001", "vin", None), ("24V002", "vin", None), ("24V003", "model", T2)]
    # Only an answer for the VIN closes what was confirmed for it.
    later = utc(2026, 4, 5, 12)
    db.land("recalls", pl.DataFrame([recall("24V002", later)]), "r4")
    db.land("recall_checks", pl.DataFrame([check(V1, later, 1)]), "r4")
    rows = db.sql("SELECT nhtsa_campaign_number, matched_by, closed_at FROM recalls ORDER BY 1").rows()
    assert rows == [("24V001", "vin", later), ("24V002", "vin", None), ("24V003", "model", T2)]
    assert db.sql("SELECT subject FROM changes WHERE kind = 'closed_recall' ORDER BY 1").rows() == [
        ("24V001",), ("24V003",)]


def failure(vin, fetched_at, attempts=3, dataset="specs", status=503):
    return {"vin": vin, "dataset": dataset, "status": status, "message": "upstream unavailable",
            "retryable": True, "attempts": attempts, "fetched_at": fetched_at}  # fmt: skip


def test_failures_lifecycle(db):
    db.land("failures", pl.DataFrame([failure(V1, T0, 3), failure(V2, T0, 1)]), "r1")
    db.land("failures", pl.DataFrame([failure(V1, T0, 3), failure(V2, T0, 1)]), "r1")  # idempotent
    assert db.sql("SELECT vin, attempts FROM failures ORDER BY vin").rows() == [(V2, 1), (V1, 3)]
    # A later run fails again: attempts add up; the first failure time stays.
    db.land("failures", pl.DataFrame([failure(V1, T1, 2)]), "r2")
    row = db.sql("SELECT attempts, run_attempts, first_failed_at, fetched_at FROM failures WHERE vin = $v",
                 {"v": V1}).rows()  # fmt: skip
    assert row == [(5, 2, T0, T1)]
    # The same run landing a retry chunk replaces its own contribution.
    db.land("failures", pl.DataFrame([failure(V1, T1, 3)]), "r2")
    assert db.sql("SELECT attempts FROM failures WHERE vin = $v", {"v": V1})["attempts"].item() == 6
    # A later success of that dataset resolves it; another dataset's success does not.
    db.land("market_values", pl.DataFrame([market_value(date(2026, 3, 5), 1.0, T2)]), "r3")
    assert db.query("open_failures", dataset="specs")["vin"].to_list() == [V2, V1]
    db.land("specs", specs_frame(T2), "r3")
    open_now = db.query("open_failures", dataset=None)
    assert open_now["vin"].to_list() == [V2]
    resolved = db.sql("SELECT resolved_at, resolved_run_id FROM failures WHERE vin = $v", {"v": V1})
    assert resolved.rows() == [(T2, "r3")]
    # Failing again after resolution starts a new episode.
    db.land("failures", pl.DataFrame([failure(V1, utc(2026, 4, 1), 1)]), "r4")
    row = db.sql("SELECT attempts, first_failed_at, resolved_at FROM failures WHERE vin = $v", {"v": V1}).rows()
    assert row == [(1, utc(2026, 4, 1), None)]


def test_old_failure_does_not_reopen_newer_success(db):
    db.land("failures", pl.DataFrame([failure(V1, T0)]), "r1")
    db.land("specs", specs_frame(T1), "r2")
    db.land("failures", pl.DataFrame([failure(V1, T0)]), "r1")  # replayed late
    assert db.query("open_failures", dataset="specs").height == 0


def test_recall_batches_ledger(db):
    submitted = {"batch_id": "b-1", "status": "uploading", "idempotency_key": "k-1", "submitted_at": T0,
                 "total_vins": 2, "processed_vins": 0, "vins_count": 2, "vins_chunk": "stage/r1/chunk-0001.parquet",
                 "fetched_at": T0}  # fmt: skip
    done = {"batch_id": "b-1", "numeric_batch_id": 42, "status": "completed", "processed_vins": 2,
            "completed_at": T1, "fetched_at": T1}  # fmt: skip
    db.land("recall_batches", pl.DataFrame([submitted]), "r1")
    assert db.query("unfinished_recall_batches")["batch_id"].to_list() == ["b-1"]
    db.land("recall_batches", pl.DataFrame([done]), "r1")
    db.land("recall_batches", pl.DataFrame([submitted]), "r1")  # a stale status replayed: ignored
    row = db.sql("SELECT status, numeric_batch_id, idempotency_key, vins_chunk, processed_vins FROM recall_batches")
    assert row.rows() == [("completed", 42, "k-1", "stage/r1/chunk-0001.parquet", 2)]
    assert db.query("unfinished_recall_batches").height == 0


def test_history_reports_keep_nested_records_as_json(db):
    frame = pl.DataFrame(
        {
            "vin": [V1],
            "brands_record_count": [2],
            "vin_changed": [False],
            "brands_information": [['{"brand": "Salvage", "date": "2020-01-01"}', '{"name": "Flood"}']],
            "history_information": [['{"event": "Title issued", "state": "CA"}']],
            "fetched_at": [T0],
        }
    )
    db.land("history_reports", frame, "r1")
    db.land("history_reports", frame, "r1")
    out = db.sql(
        "SELECT title_brands, brands_information[1]->>'date' AS d, history_information[1]->>'state' AS s "
        "FROM history_reports"
    )
    assert out.rows() == [(["Salvage", "Flood"], "2020-01-01", "CA")]


def test_lien_theft_events_replaced_by_newer_report(db):
    def events(fetched_at, names):
        return pl.DataFrame(
            [{"vin": V1, "event_index": i, "event": n, "location": "CA", "details_list": ["x"], "year": 2003,
              "fetched_at": fetched_at} for i, n in enumerate(names)]  # fmt: skip
        )

    db.land("lien_theft_events", events(T0, ["Lien", "Theft"]), "r1")
    db.land("lien_theft_events", events(T0, ["Lien", "Theft"]), "r1")
    assert db.sql("SELECT count(*) AS n FROM lien_theft_events")["n"].item() == 2
    db.land("lien_theft_events", events(T1, ["Recovered"]), "r2")
    db.land("lien_theft_events", events(T0, ["Lien", "Theft"]), "r1")  # older report replayed: ignored
    assert db.sql("SELECT event, details_list FROM lien_theft_events").rows() == [("Recovered", ["x"])]


def test_a_newer_report_with_no_events_clears_the_old_ones(db):
    """A lien released: the newer report lists no events, so no row lands, yet the old events must go."""
    old = pl.DataFrame([{"vin": V1, "event_index": 0, "event": "Lien", "fetched_at": T0}])
    answered = lambda at, outcome: pl.DataFrame([{"vin": V1, "dataset": "lien_theft", "outcome": outcome,  # noqa: E731
                                                  "fetched_at": at}])
    db.land_chunk({"lien_theft_events": old, "fetch_status": answered(T0, "found")}, "r1")
    db.land_chunk({"lien_theft_events": old.clear(), "fetch_status": answered(T1, "found")}, "r2")
    assert db.sql("SELECT count(*) FROM lien_theft_events").item() == 0
    db.land("fetch_status", answered(T0, "found"), "r1")  # an older answer replayed late clears nothing newer
    db.land("lien_theft_events", old.with_columns(pl.lit(T2).alias("fetched_at")), "r3")
    db.land("fetch_status", answered(T1, "no_data"), "r2")
    assert db.sql("SELECT event FROM lien_theft_events").rows() == [("Lien",)]


def test_api_calls_and_run_summary(db):
    run = db.start_run("refresh", ["f.csv"], {"datasets": ["specs"]}, started_at=T0)
    calls = pl.DataFrame(
        {
            "call_id": ["c1", "c2", "c3"],
            "endpoint": ["/specs", "/specs", "/v2/marketvalue"],
            "vin": [V1, V1, V2],
            "status": [503, 200, 200],
            "units": [0, 1, 1],
            "latency_ms": [120.0, 80.0, 95.5],
            "attempt": [1, 2, 1],
            "fetched_at": [T0, T0, T0],
        }
    )
    db.land("api_calls", calls, run)
    db.land("api_calls", calls, run)
    db.finish_run(run, "completed", counts={"rows_in": 3, "valid": 2, "duplicates": 0, "rejected": 1})
    runs = db.sql("SELECT status, units_used, rows_in, rejected, finished_at IS NOT NULL AS done FROM runs")
    assert runs.rows() == [("completed", 2, 3, 1, True)]
    db.land("api_calls", pl.DataFrame([{"call_id": "c4", "endpoint": "/history", "status": 404, "units": 0,
                                         "error_message": "NotFoundError", "fetched_at": T0}]), run)
    summary = db.query("run_summary", run_id=run)
    assert summary.select("endpoint", "calls", "units", "failed_calls", "no_data_calls").rows() == [
        ("/history", 1, 0, 0, 1),  # "no data" is an answer, not a failed call
        ("/specs", 2, 1, 1, 0),
        ("/v2/marketvalue", 1, 1, 0, 0),
    ]


def test_raw_responses_are_redacted_and_deduplicated(db):
    body = '{"success": true, "input": {"key": "sk_live_SECRET", "vin": "%s"}, "attributes": {"make": "Honda"}}' % V1
    frame = pl.DataFrame(
        {
            "dataset": ["specs"],
            "vin": [V1],
            "endpoint": ["/specs"],
            "request_params": ['{"vin": "%s", "key": "sk_live_SECRET"}' % V1],
            "status": [200],
            "body": [body],
            "fetched_at": [T0],
        }
    )
    db.land("raw_responses", frame, "r1")
    db.land("raw_responses", frame, "r1")
    out = db.sql("SELECT CAST(body AS VARCHAR) AS b, CAST(request_params AS VARCHAR) AS p, response_hash FROM raw_responses")
    assert out.height == 1
    assert "SECRET" not in out["b"].item() and "SECRET" not in out["p"].item()
    assert db.sql("SELECT body->'input'->>'vin' AS v FROM raw_responses")["v"].item() == V1
    assert db.sql("SELECT count(*) AS n FROM raw_responses WHERE dataset = 'specs'")["n"].item() == 1


def test_planning_queries(db):
    result = read_fleet(["data/sample_fleet.csv"])
    db.land("vehicles", result.roster.head(3), "r1")
    vins = result.roster.head(3)["vin"].sort().to_list()
    assert db.query("roster_vins")["vin"].to_list() == vins

    def due(force=False, no_data_after=None):
        return db.query("due_vins", run_id="r1", dataset="recalls", force=force, fresh_after=T1,
                        no_data_after=no_data_after, future_after=None, service=None)["vin"].to_list()

    assert due() == vins  # never answered
    answered = [{"vin": vins[0], "dataset": "recalls", "outcome": "found", "fetched_at": T2},
                {"vin": vins[1], "dataset": "recalls", "outcome": "no_data", "fetched_at": T2},
                {"vin": vins[2], "dataset": "recalls", "outcome": "found", "fetched_at": T0}]
    db.land("fetch_status", pl.DataFrame(answered), "r1")
    assert due() == vins[2:]  # a stable "no data" is fresh too; an answer older than the window is not
    assert due(no_data_after=utc(2026, 3, 6)) == sorted(vins[1:])  # ...until its own, shorter window ends
    assert due(force=True) == vins
    other_dataset = db.query("due_vins", run_id="r1", dataset="specs", force=False, fresh_after=T1, no_data_after=T1,
                             future_after=None, service=None)
    assert other_dataset["vin"].to_list() == vins


def test_empty_chunk_is_a_no_op(db):
    assert db.land("specs", specs_frame().clear(), "r1") == 0
    assert db.sql("SELECT count(*) AS n FROM specs")["n"].item() == 0
    assert isinstance(specs_frame().to_arrow(), pa.Table)
