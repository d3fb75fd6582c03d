"""Rows with a plate instead of a VIN: what can be looked up, the lookups against the sandbox, where rows land."""

from datetime import datetime, timezone

import polars as pl
import pytest

from fleet_data.connectors import Settings
from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox
from fleet_data.connectors.sandbox import plates as sandbox_plates
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.control.budget import Budget
from fleet_data.tasks.fetch.plates import look_up_plates
from fleet_data.tasks.ingest.plates import (
    PLATE_LOOKUP_FAILED, PLATE_LOOKUP_OFF, PLATE_NEEDS_STATE, PLATE_NOT_FOUND, PLATE_NOT_LOOKED_UP, lookup_keys,
    merge_into_roster, place_looked_up, plan_plates, resolutions_frame, sort_plate_rows, with_lookup_keys,
)  # fmt: skip

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)
V1, V2 = "1HGCM82633A004352", "1FTFW1E50KFA12345"


def plate_rows(rows: list[tuple]) -> pl.DataFrame:
    """(plate, state, country) rows as ingest hands them over, numbered from 1."""
    return pl.DataFrame(
        [{"source_file": "f.csv", "source_row": i, "plate": p, "state": s, "country": c, "unit_number": f"U{i}"}
         for i, (p, s, c) in enumerate(rows, 1)],
        schema={"source_file": pl.String, "source_row": pl.Int64, "plate": pl.String, "state": pl.String,
                "country": pl.String, "unit_number": pl.String},
    )


def test_each_plate_is_asked_for_with_its_country_and_the_state_the_spec_wants():
    keyed = with_lookup_keys(plate_rows([
        ("abc 123", "TX", None),      # a US state: country US
        ("abc-123", "ON", None),      # a Canadian province: country CA
        ("X1", "NSW", None),          # an Australian state: country AU
        ("X2", "WA", "Australia"),    # the country column says which WA
        ("GB12XYZ", None, "gb"),      # elsewhere the country alone will do, and no state is sent
        ("D1", "BY", "DE"),
        ("U1", None, "US"),           # a US plate needs its state: without one every state is searched, billed per hit
        ("C1", None, "CA"),           # Canada and Australia need one by the spec
        ("Q1", "QC", "US"),           # Quebec is no US state
        ("Z1", "ZZ", None),           # nothing says which country
        ("N1", None, None),
    ]))
    assert keyed.select("lookup_country", "lookup_state", "lookup_plate", "plate_problem").rows() == [
        ("US", "TX", "ABC123", None), ("CA", "ON", "ABC123", None), ("AU", "NSW", "X1", None),
        ("AU", "WA", "X2", None), ("GB", None, "GB12XYZ", None), ("DE", None, "D1", None),
        ("US", None, "U1", PLATE_NEEDS_STATE), ("CA", None, "C1", PLATE_NEEDS_STATE),
        ("US", None, "Q1", PLATE_NEEDS_STATE), (None, None, "Z1", PLATE_NEEDS_STATE),
        (None, None, "N1", PLATE_NEEDS_STATE),
    ]


def test_at_ingest_known_plates_take_their_vin_and_the_rest_wait_or_are_rejected():
    rows = plate_rows([("KNOWN1", "TX", None), ("NEW1", "TX", None), ("NEW1", "tx", None), ("N1", None, None),
                       ("GB1", None, "GB"), ("GONE1", "TX", None)])
    fresh = pl.DataFrame({"plate": ["KNOWN1", "GB1", "GONE1"], "state": ["TX", None, "TX"], "country": ["US", "GB", "US"],
                          "vin": [V1, V2, None], "outcome": ["found", "found", "not_found"]})
    sorted_ = sort_plate_rows(rows, fresh=fresh, enabled=True)
    assert sorted_.known.select("source_row", "vin").rows() == [(1, V1), (5, V2)]
    assert sorted_.waiting["source_row"].to_list() == [2, 3]
    assert lookup_keys(sorted_.waiting) == [("US", "TX", "NEW1")]  # the same plate twice is one lookup
    assert sorted_.rejected.select("source_row", "raw_value", "reason").rows() == [
        (4, None, PLATE_NEEDS_STATE), (6, None, PLATE_NOT_FOUND)]  # not found a few days ago: not asked again yet

    off = sort_plate_rows(rows, fresh=fresh, enabled=False)
    assert off.known.height == 0 and off.waiting.height == 0
    assert set(off.rejected["reason"]) == {PLATE_LOOKUP_OFF}
    assert off.rejected.height == rows.height


def test_the_plan_prices_one_lookup_per_plate(tmp_path):
    path = tmp_path / "plates.parquet"
    sort_plate_rows(plate_rows([("A1", "TX", None), ("A1", "TX", None), ("B2", "ON", None)]),
                    fresh=None, enabled=True).waiting.write_parquet(path)
    plan = plan_plates(str(path))
    assert (plan.rows, plan.lookups, plan.estimated_units, plan.path) == (3, 2, 2, str(path))


def test_vins_found_by_plate_join_the_roster_once_each():
    roster = pl.DataFrame({"vin": [V1], "source_file": ["f.csv"], "source_row": [1], "duplicate_count": [0]})
    found = pl.DataFrame({"source_file": ["f.csv"] * 3, "source_row": [7, 8, 9], "plate": ["P1", "P2", "P3"],
                          "vin": [V1, V2, V2]})
    merged, new, added = merge_into_roster(roster, found)
    assert merged.select("vin", "duplicate_count").rows() == [(V1, 1)]  # the file listed it: a duplicate
    assert new.select("vin", "source_row", "vin_source", "check_digit_valid", "duplicate_count").rows() == [
        (V2, 8, "plate", True, 1)]
    assert added == {"valid": 1, "duplicates": 2}


def sandbox_plate(found: bool, start: int = 0) -> str:
    """A Texas plate the sandbox knows (or does not): its answers are a pure function of the plate."""
    for i in range(start, start + 500):
        plate = f"T{i:04d}"
        if (sandbox_plates.lookup("US", "TX", plate) is not None) == found:
            return plate
    raise AssertionError("unreachable")


@pytest.fixture
def sandbox():
    with run_sandbox(SandboxConfig()) as sb:
        yield sb


async def test_lookups_against_the_sandbox_find_vins_reject_the_rest_and_count_every_call(sandbox):
    settings = Settings(api_key="plates_test_key", base_url=sandbox.url)
    known, unknown = sandbox_plate(True), sandbox_plate(False)
    keys = [("US", "TX", known), ("US", "TX", unknown), ("GB", None, sandbox_plate(True, 100))]
    lookups = await look_up_plates(keys, calls=Calls(settings=settings, concurrency=4, budget=Budget(None)))
    assert sandbox.count("/v2/platedecoder") == 3 == len(lookups.calls)
    outcome = {k: (r.outcome, r.status) for k, r in lookups.results.items()}
    assert outcome == {keys[0]: ("found", 200), keys[1]: ("not_found", 404), keys[2]: ("found", 200)}
    assert lookups.results[keys[0]].vin == sandbox_plates.lookup("US", "TX", known)["vin"]
    assert lookups.units == 2  # a 404 is not billed

    waiting = with_lookup_keys(plate_rows([(known, "TX", None), (unknown, "TX", None)]))
    found, rejected = place_looked_up(waiting, lookups)
    assert found.select("source_row", "vin").rows() == [(1, lookups.results[keys[0]].vin)]
    assert rejected.select("source_row", "reason").rows() == [(2, PLATE_NOT_FOUND)]
    frame = resolutions_frame(lookups)
    assert sorted(frame.select("plate", "state", "country", "outcome").rows(), key=str) == sorted(
        [(known, "TX", "US", "found"), (unknown, "TX", "US", "not_found"), (keys[2][2], None, "GB", "found")], key=str)


async def test_a_budget_or_a_refusal_leaves_plates_not_looked_up_and_errors_fail_them(sandbox):
    settings = Settings(api_key="plates_test_key", base_url=sandbox.url)
    keys = [("US", "TX", sandbox_plate(True, i * 50)) for i in range(3)]
    lookups = await look_up_plates(keys, calls=Calls(settings=settings, concurrency=1, budget=Budget(1)))
    assert sandbox.count("/v2/platedecoder") == 1
    assert len(lookups.not_looked_up) == 2 and lookups.stop_reason == "max-units reached"
    rows = with_lookup_keys(plate_rows([(k[2], "TX", None) for k in keys]))
    _, rejected = place_looked_up(rows, lookups)
    assert rejected["reason"].to_list() == [PLATE_NOT_LOOKED_UP] * 2

    stopped = await look_up_plates(
        keys,
        calls=Calls(settings=Settings(api_key="test_quota_0", base_url=sandbox.url), concurrency=1, budget=Budget(None)),
    )
    assert "429" in stopped.stop_reason and len(stopped.not_looked_up) == 3 and not stopped.results

    blocked = await look_up_plates(
        keys,
        calls=Calls(settings=Settings(api_key="test_blocked", base_url=sandbox.url), concurrency=1, budget=Budget(None)),
    )
    assert "403" in blocked.stop_reason and not blocked.results  # a blocked key stops, it does not fail each plate

    bad = await look_up_plates(
        [("XX", None, "ABC")],
        calls=Calls(settings=settings, concurrency=1, budget=Budget(None)),
    )
    assert bad.results[("XX", None, "ABC")].outcome == "not_found"  # 404 Invalid state or country code.
    _, rejected = place_looked_up(with_lookup_keys(plate_rows([("ABC", None, "XX")])), bad)
    assert rejected["reason"].to_list() == [PLATE_NOT_FOUND]


async def test_a_lookup_that_keeps_failing_is_a_reject_with_its_reason_and_the_others_go_on(sandbox):
    from fleet_data.connectors.sandbox import FaultConfig

    settings = Settings(api_key="plates_test_key", base_url=sandbox.url)
    sandbox.set_faults(FaultConfig(rate=1.0, statuses=[500], seed=3))
    keys = [("US", "TX", sandbox_plate(True)), ("US", "TX", sandbox_plate(True, 50))]
    lookups = await look_up_plates(keys, calls=Calls(settings=settings, concurrency=2, budget=Budget(None)))
    assert {r.outcome for r in lookups.results.values()} == {"failed"} and not lookups.not_looked_up
    assert all(r.status == 500 and r.message for r in lookups.results.values())
    _, rejected = place_looked_up(with_lookup_keys(plate_rows([(k[2], "TX", None) for k in keys])), lookups)
    assert rejected["reason"].to_list() == [PLATE_LOOKUP_FAILED] * 2
    assert resolutions_frame(lookups)["outcome"].to_list() == ["failed", "failed"]


def test_a_plate_leading_to_a_vin_the_file_lists_is_a_duplicate_of_that_row(tmp_path):
    from fleet_data.tasks.ingest.plates import Lookup, PlateLookups
    from fleet_data.tasks.land.plates import land_lookups
    from fleet_data.tasks.store.database import open_database

    with open_database(tmp_path / "fleet.duckdb") as db:
        run = db.start_run("refresh", ["f.csv"], started_at=T0)
        db.land("vehicles", pl.DataFrame({"vin": [V1], "source_file": ["f.csv"], "source_row": [1], "duplicate_count": [0],
                                          "cost_center": ["CC-7"]}), run)
        waiting = with_lookup_keys(plate_rows([("SAME1", "TX", None), ("NEW2", "ON", None)]))
        lookups = PlateLookups(results={("US", "TX", "SAME1"): Lookup("found", V1, 200, None, T0),
                                        ("CA", "ON", "NEW2"): Lookup("found", V2, 200, None, T0)})
        counts = land_lookups(db, run, waiting, lookups)
        assert (counts.valid, counts.duplicates, counts.rejected) == (1, 1, 0)
        assert db.sql("SELECT vin, vin_source, duplicate_count, extra->>'cost_center', extra->>'country', state "
                      "FROM vehicles ORDER BY vin").rows() == [
            (V2, "plate", 0, None, None, "ON"), (V1, "file", 1, "CC-7", None, None)]  # the file's row, counted once more
        assert db.sql("SELECT count(*) FROM plate_resolutions WHERE run_id = $r", {"r": run}).item() == 2


async def test_journalled_lookups_land_from_the_journal_as_they_land_from_the_run(sandbox, tmp_path):
    """A run killed after its lookups leaves their journal: landed by the next run, it gives the same
    resolutions and the same calls as the lookups' own landing, and landing it twice changes nothing."""
    from fleet_data.connectors import RetryPolicy
    from fleet_data.connectors.sandbox import FaultConfig
    from fleet_data.tasks.land.frames import api_calls_frame
    from fleet_data.tasks.land.recover import land_journals
    from fleet_data.tasks.staging.journal import PLATE_LOOKUPS, AnswerJournal, read_journal
    from fleet_data.tasks.store.database import open_database

    settings = Settings(api_key="plates_journal_key", base_url=sandbox.url,
                        retry=RetryPolicy(initial_backoff=0.001, max_backoff=0.01, max_retry_after=0.01))
    sandbox.set_faults(FaultConfig(rate=0.3, statuses=[502], seed=5))  # some lookups retried: their calls journalled too
    keys = [("US", "TX", sandbox_plate(True, i * 10)) for i in range(6)] + [("US", "TX", sandbox_plate(False))]
    answers = tmp_path / "staging" / "run-1" / "answers"
    with AnswerJournal.create(answers, "run-1", PLATE_LOOKUPS, secrets=("plates_journal_key",)) as journal:
        lookups = await look_up_plates(keys, calls=Calls(settings=settings, concurrency=3, budget=Budget(None)),
                                       journal=journal)
    assert len(lookups.calls) > len(keys)  # retries happened
    read = read_journal(journal.path)
    assert read.damage is None and "plates_journal_key" not in journal.path.read_text(errors="replace")

    written = journal.path.read_bytes()
    with open_database(tmp_path / "fleet.duckdb") as db:
        run = db.start_run("refresh", ["f.csv"], run_id="run-1", started_at=T0)
        landed = []
        for _ in range(2):  # the second time as if the kill came after the landing, before the journal's deletion
            journal.path.write_bytes(written)
            assert land_journals(db, tmp_path / "staging", besides="run-2")["journals"] == 1
            assert not journal.path.exists()  # landed, then deleted
            landed.append((
                db.sql("SELECT call_id, endpoint, vin, status, units, attempt, billing FROM api_calls ORDER BY call_id").rows(),
                db.sql("SELECT plate, state, country, vin, outcome, status FROM plate_resolutions ORDER BY plate").rows()))
        assert landed[0] == landed[1]
        journal_calls, resolutions = landed[0]
        expected_calls = api_calls_frame(lookups.calls).select(
            "call_id", "endpoint", "vin", "status", "units", "attempt", "billing").sort("call_id").rows()
        assert journal_calls == expected_calls
        assert resolutions == resolutions_frame(lookups).select(
            "plate", "state", "country", "vin", "outcome", "status").sort("plate").rows()
        assert db.sql("SELECT count(*) FROM plate_resolutions WHERE run_id = $r", {"r": run}).item() == len(keys)
