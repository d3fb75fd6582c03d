"""A journal lands set-based (`land_answers`, SQL over its Arrow rows) exactly as its chunk result does, and
the typed tables a fetch task stages beside it (tasks/staging/staged_chunk.py) land exactly as the journal does.

Against the sandbox over a real socket: found, no-data, failing (500) and retried (502) VINs on every
per-VIN dataset, plus an answer that is not a JSON object. Each table, each way, into stores of their own.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from fleet_data.connectors import RetryPolicy, Settings
from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.fetch.enrich import fetch_chunk
from fleet_data.tasks.staging import staged_chunk
from fleet_data.tasks.staging.journal import AnswerJournal, read_journal
from fleet_data.tasks.land.landing import land_answers, land_enrichment, land_together
from fleet_data.tasks.land.recover import land_journals
from fleet_data.tasks.land.shred import staged_tables
from fleet_data.tasks.staging.staged_chunk import StagedTables
from fleet_data.tasks.store.database import open_database

RUN = "20260101T000000Z-answers"
VINS = ["1HGCM82633A004352", "1HGCM82633A004353", "1HGCM82633A004363", "1HGCM82633A000404",
        "1HGCM82633A000500", "1HGCM82633A000502"]
ROWS = [{"vin": v, "state": "CA", "mileage": 42_000 + i} for i, v in enumerate(VINS)]
QUICK_RETRIES = RetryPolicy(initial_backoff=0.001, max_backoff=0.01, max_retry_after=0.01)
TABLES = {  # what to compare, and the key to sort by
    "specs": "vin", "market_values": "vin", "history_reports": "vin", "lien_theft_events": "vin, event_index",
    "recalls": "vin, nhtsa_campaign_number", "recall_checks": "vin, fetched_at", "fetch_status": "vin, dataset",
    "failures": "vin, dataset", "api_calls": "call_id",
}


@pytest.fixture(scope="module")
def sandbox():
    with run_sandbox(SandboxConfig()) as sb:
        yield sb


def rows(db, table: str, key: str) -> list[tuple]:
    # A body the model refuses fails with the model's words; SQL says what it checks (not an object).
    message = ", CASE WHEN status = 200 THEN 'refused' ELSE message END AS message" if table == "failures" else ""
    return db.sql(f"SELECT * EXCLUDE (run_id){' REPLACE (' + message[2:] + ')' if message else ''} "
                  f"FROM {table} ORDER BY {key}").rows()


@pytest.mark.parametrize("dataset", ["specs", "market_value", "history", "lien_theft", "recall_details"])
async def test_a_journal_lands_set_based_as_its_chunk_result_does(sandbox, tmp_path, dataset):
    key = f"land_answers_{dataset}"
    settings = Settings(api_key=key, base_url=sandbox.url, retry=QUICK_RETRIES)
    with AnswerJournal.create(tmp_path, RUN, dataset, secrets=(key,)) as journal:
        await fetch_chunk(dataset, ROWS, calls=Calls(settings=settings, concurrency=3), journal=journal)
        journal.answer(None, "1HGCM82633A009999", "found", datetime(2026, 1, 1, tzinfo=timezone.utc), body=b"[1, 2]")
    staged = read_journal(journal.path)
    assert staged.table.num_rows > len(VINS)

    by_sql, by_models = open_database(tmp_path / "sql.duckdb"), open_database(tmp_path / "models.duckdb")
    try:
        land_answers(by_sql, RUN, dataset, staged.table)
        land_enrichment(by_models, RUN, staged.chunk_result())
        for table, order in TABLES.items():
            assert rows(by_sql, table, order) == rows(by_models, table, order), table
        assert by_sql.sql("SELECT count(*) FROM failures WHERE status = 200").item() == 1  # the list, not an object
        raw = "SELECT vin, endpoint, status, request_params, body FROM raw_responses ORDER BY vin"
        got, expected = by_sql.sql(raw).rows(), by_models.sql(raw).rows()
        assert [(v, e, s, json.loads(p), json.loads(b)) for v, e, s, p, b in got] == \
               [(v, e, s, json.loads(p), json.loads(b)) for v, e, s, p, b in expected]
        assert key not in str(got)

        typed = staged_chunk.write(tmp_path / "typed.tables.arrow",
                                   StagedTables(dataset, staged_tables(dataset, staged.table)))
        with open_database(tmp_path / "typed.duckdb") as by_typed:  # what the fetch task stages, landed as it is
            land_answers(by_typed, RUN, dataset, staged_chunk.read(typed))
            for table, order in {**TABLES, "raw_responses": "response_hash"}.items():
                assert rows(by_typed, table, order) == rows(by_sql, table, order), table

        before = {table: rows(by_sql, table, order) for table, order in TABLES.items()}
        raw_before = by_sql.sql("SELECT count(*) FROM raw_responses").item()
        land_answers(by_sql, RUN, dataset, staged.table)  # the same journal again: nothing changes
        assert {table: rows(by_sql, table, order) for table, order in TABLES.items()} == before
        assert by_sql.sql("SELECT count(*) FROM raw_responses").item() == raw_before
    finally:
        by_sql.close()
        by_models.close()


def test_a_journal_without_a_call_or_a_failure_lands_nothing():
    from fleet_data.tasks.staging.journal import SCHEMA
    from fleet_data.tasks.land.landing import worth_landing

    pending = pa.Table.from_pylist([{"vin": "1HGCM82633A004352", "outcome": "pending"}], schema=SCHEMA)
    failed = pa.Table.from_pylist([{"vin": "1HGCM82633A004352", "outcome": "failed"}], schema=SCHEMA)
    assert not worth_landing(pending) and not worth_landing(SCHEMA.empty_table()) and worth_landing(failed)


async def test_a_failure_counts_the_attempts_made_in_an_earlier_chunk(sandbox, tmp_path):
    """A retry handed to the next chunk (tasks/fetch/lanes.py) settles in that chunk's journal: its failure still
    counts every attempt the VIN had, not only the rows of the journal it settled in."""
    key = "land_answers_handed_over"
    settings = Settings(api_key=key, base_url=sandbox.url, retry=QUICK_RETRIES)
    failing = "1HGCM82633A000500"  # 500, retried once, then failed
    with AnswerJournal.create(tmp_path, RUN, "specs", secrets=(key,)) as journal:
        await fetch_chunk(
            "specs",
            [r for r in ROWS if r["vin"] == failing],
            calls=Calls(settings=settings, concurrency=1),
            journal=journal,
        )
    table = read_journal(journal.path).table
    settled = table.filter(pc.is_valid(table.column("outcome")))  # the first attempt was in another journal
    assert settled.num_rows == 1 and settled.column("attempt").to_pylist() == [2]
    db = open_database(tmp_path / "handed.duckdb")
    try:
        land_answers(db, RUN, "specs", settled)
        assert db.sql("SELECT vin, attempts FROM failures").rows() == [(failing, 2)]
    finally:
        db.close()


async def test_a_killed_runs_journal_lands_its_staged_tables_and_both_files_go(sandbox, tmp_path):
    """A run killed after its fetch staged the typed tables, before the landing: the next run lands them (the
    journal's rows are not shredded again) and deletes both files; a journal without them is shredded."""
    key = "land_answers_leftover"
    settings = Settings(api_key=key, base_url=sandbox.url, retry=QUICK_RETRIES)
    answers = tmp_path / "staging" / RUN / "answers"
    journals = []
    for rows_of_chunk in (ROWS[:3], ROWS[3:]):
        with AnswerJournal.create(answers, RUN, "specs", secrets=(key,)) as journal:
            await fetch_chunk("specs", rows_of_chunk, calls=Calls(settings=settings, concurrency=2), journal=journal)
        journals.append(journal.path)
    table = read_journal(journals[0]).table
    first = {r["vin"] for r in table.to_pylist() if r["outcome"] == "found"}
    tables = staged_tables("specs", table)
    # Told apart by what lands: the first chunk's typed tables say its VINs decoded as a make they never had.
    tables["specs"] = tables["specs"].set_column(tables["specs"].schema.get_field_index("make"), "make",
                                                 pa.array(["Staged"] * tables["specs"].num_rows))
    staged_chunk.write(Path(staged_chunk.location(str(journals[0]))), StagedTables("specs", tables))
    with open_database(tmp_path / "fleet.duckdb") as db:
        counts = land_journals(db, tmp_path / "staging", besides="next-run")
        makes = dict(db.sql("SELECT vin, make FROM specs").rows())
    assert counts["journals"] == 2
    assert first and all(makes[vin] == "Staged" for vin in first)
    assert all(make != "Staged" for vin, make in makes.items() if vin not in first)
    assert not list(answers.iterdir())


@pytest.mark.parametrize("dataset", ["market_value", "recall_details"])
async def test_raw_answers_failures_and_calls_name_an_endpoint_alike_so_they_join(sandbox, tmp_path, dataset):
    """One endpoint name across the tables (issue 30): the service's path, as `api_calls.endpoint` has it."""
    from fleet_data.connectors import ENDPOINTS

    key = f"endpoint_names_{dataset}"
    settings = Settings(api_key=key, base_url=sandbox.url, retry=QUICK_RETRIES)
    with AnswerJournal.create(tmp_path, RUN, dataset, secrets=(key,)) as journal:
        await fetch_chunk(dataset, ROWS, calls=Calls(settings=settings, concurrency=3), journal=journal)
    with open_database(tmp_path / "names.duckdb") as db:
        land_answers(db, RUN, dataset, read_journal(journal.path).table)
        paths = {e.path for e in ENDPOINTS.values()}
        called = set(db.sql("SELECT DISTINCT endpoint FROM api_calls")["endpoint"].to_list())
        stored = set(db.sql("SELECT DISTINCT endpoint FROM raw_responses")["endpoint"].to_list())
        failed = set(db.sql("SELECT DISTINCT endpoint FROM failures")["endpoint"].to_list())
        assert called <= paths and stored and failed  # the 500 VIN failed
        assert stored <= called and failed <= called
        joined = db.sql("SELECT count(*) FROM raw_responses AS r JOIN (SELECT DISTINCT endpoint FROM api_calls) "
                        "USING (endpoint)").item()
        assert joined == db.sql("SELECT count(*) FROM raw_responses").item()


DATASETS = ["specs", "market_value", "history", "lien_theft", "recall_details"]


async def _staged_chunks(sandbox, tmp_path: Path, key: str) -> list[tuple[str, StagedTables]]:
    """Every per-VIN dataset's answers for VINS in two chunks each, staged as fetch tasks stage them."""
    settings = Settings(api_key=key, base_url=sandbox.url, retry=QUICK_RETRIES)
    chunks = []
    for dataset in DATASETS:
        for rows_of_chunk in (ROWS[:3], ROWS[3:]):
            with AnswerJournal.create(tmp_path, RUN, dataset, secrets=(key,)) as journal:
                await fetch_chunk(dataset, rows_of_chunk, calls=Calls(settings=settings, concurrency=2), journal=journal)
            chunks.append((dataset, StagedTables(dataset, staged_tables(dataset, read_journal(journal.path).table))))
    return chunks


async def test_chunks_landed_together_leave_what_landing_them_one_by_one_leaves(tmp_path):
    """The flow lands the chunks that came back together in one transaction (`land_together`): every table, the
    change feed included, ends as it does when each chunk lands alone, over an empty store and over one holding
    older answers that the new ones change."""
    changed = VINS[0]  # a VIN with lien/theft events
    with run_sandbox(SandboxConfig()) as sandbox, open_database(tmp_path / "alone.duckdb") as alone, \
            open_database(tmp_path / "together.duckdb") as together:
        for round_ in ("first", "changed"):
            if round_ == "changed":
                events = sandbox_answer(sandbox, "/v1/lien-theft", changed)["events"]
                sandbox.set_vehicle(changed, value_factor=0.7, specs={"trim": "Changed Trim"},
                                    lien_theft=events[1:], title_brands=["Salvage"])
            chunks = await _staged_chunks(sandbox, tmp_path / round_, f"together_{round_}")
            for dataset, staged in chunks:
                land_answers(alone, RUN, dataset, staged)
            assert land_together(together, RUN, chunks)["api_calls"] == sum(s.tables["api_calls"].num_rows
                                                                             for _, s in chunks)
            for table, order in {**TABLES, "raw_responses": "response_hash", "lien_theft_events": "vin, event_index",
                                 "changes": "vin, dataset, kind, subject"}.items():
                expected = alone.sql(f"SELECT * EXCLUDE (detected_at) FROM {table} ORDER BY {order}").rows() \
                    if table == "changes" else rows(alone, table, order)
                got = together.sql(f"SELECT * EXCLUDE (detected_at) FROM {table} ORDER BY {order}").rows() \
                    if table == "changes" else rows(together, table, order)
                assert got == expected, (round_, table)
        assert alone.sql("SELECT count(*) FROM changes WHERE vin = $v", {"v": changed}).item() >= 3  # it did change


def sandbox_answer(sandbox, path: str, vin: str) -> dict:
    import httpx

    return httpx.get(f"{sandbox.url}{path}", params={"key": "together_peek", "vin": vin}).json()
