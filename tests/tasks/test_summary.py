"""The run summary: spend as known plus possible (a call never answered may have been billed); printed whole
outside a terminal at any fleet size; the plan's numbers and the summary's the same; no "no changes" where
nothing could change."""

from __future__ import annotations

from contextlib import redirect_stdout
from datetime import datetime, timezone

from fleet_data.connectors import CallRecord
from fleet_data.tasks.outputs.summary import headline, notes, print_summary, rows
from fleet_data.tasks.run.summary import DatasetFigures, RunSummary
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.steps.refresh_tasks import chunk_outcome

AT = datetime(2026, 11, 26, tzinfo=timezone.utc)


def _call(n: int, status: int | None, units: int, unknown: bool) -> tuple:
    record = CallRecord(endpoint="specs", method="GET", path="/specs", vin=f"VIN{n}", status=status, attempt=1,
                        latency_ms=5.0, units=units, error=None if status else "APITimeoutError", will_retry=False,
                        call_id=f"call-{n}", unknown=unknown)
    return (record.call_id, record, AT, None)


def test_a_run_that_timed_out_calls_shows_what_they_may_have_cost_beside_what_it_spent():
    result = ChunkResult("specs", calls=[_call(1, 200, 1, False), _call(2, 200, 1, False), _call(3, None, 1, True)])
    running = RunSummary("r", estimated_units=3, datasets={"specs": DatasetFigures(planned=3)})
    running.add_chunk("specs", chunk_outcome(result))
    running.end()
    summary = running.as_json()
    assert (summary["calls"], summary["units"], summary["possible_units"]) == (3, 2, 1)
    assert "spent 2 units in 3 calls (+ up to 1 for calls never answered)" in headline(summary)
    assert any("1 units possibly spent" in note for note in notes(summary))


def test_damaged_journals_in_quarantine_are_named_in_the_summary():
    summary = {"datasets": {}, "quarantined_journals": 2, "quarantine_folder": "/data/staging/quarantine"}
    assert any("2 damaged answer journals" in note and "/data/staging/quarantine" in note for note in notes(summary))


# --- printed outside a terminal: whole lines, whole figures ----------------------------------------

def _million_vin_summary() -> dict:
    """A summary as a refresh of 1,250,000 VINs leaves it (figures of 7 digits in every column)."""
    counts = {"roster": 1_250_000, "not_applicable": 1_234, "skipped_fresh": 0, "planned": 1_248_766,
              "estimated_units": 1_248_766, "found": 1_100_000, "no_data": 98_766, "failed": 25_000, "pending": 25_000,
              "calls": 1_223_766, "units": 1_100_000, "stop_reason": None}
    datasets = {name: dict(counts) for name in ("specs", "market_value", "history", "lien_theft", "recalls")}
    return {"run_id": "20261128T000000Z-abcdef", "kind": "refresh", "status": "partial",
            "ingest": {"rows_in": 1_260_000, "valid": 1_250_000, "duplicates": 6_000, "rejected": 4_000},
            "estimated_units": 6_243_830, "recall_detail_ceiling": 1_248_766, "units": 5_500_000, "calls": 4_900_004,
            "possible_units": 0, "datasets": datasets,
            "recall_details": {"due": 1_000_000, "by_model": 0, "by_vin": 990_000, "failed": 10_000, "pending": 0,
                               "calls": 1_000_000, "units": 990_000},
            "changes": {"total": 0, "vehicles": 0, "park_now": 0, "park_outside": 0, "by_kind": {}}}


def test_a_million_vin_summary_printed_to_a_file_keeps_every_figure_and_header_whole(tmp_path):
    summary = _million_vin_summary()
    out = tmp_path / "summary.txt"
    with out.open("w") as stream, redirect_stdout(stream):  # a file, as cron or CI keep it: not a terminal
        print_summary(summary)
    lines = out.read_text().splitlines()
    assert [line for line in lines if line != line.rstrip()] == []  # no trailing space
    assert "…" not in out.read_text()
    header = next(line for line in lines if line.startswith("dataset"))
    assert header.split() == ["dataset", "VINs", "n/a", "fresh", "due", "est.", "found", "none", "failed", "pending",
                              "calls", "units"]
    specs = next(line for line in lines if line.startswith("specs "))
    assert specs.split() == ["specs", "1250000", "1234", "0", "1248766", "1248766", "1100000", "98766", "25000",
                             "25000", "1223766", "1100000"]
    # The headline's parts are lines of their own, each whole (no wrapping at any width).
    assert f"run {summary['run_id']}: partial" in lines
    assert "1260000 rows in, 1250000 VINs, 6000 duplicates, 4000 rejected" in lines
    assert "estimated 6243830 units (+ up to 1248766 for recall campaign details)" in lines
    assert "spent 5500000 units in 4900004 calls" in lines


def test_the_summary_says_the_plans_numbers_and_what_plates_added_to_them():
    """The plan printed before any call, then plates found vehicles: the summary's estimate is the plan's plus theirs."""
    from fleet_data.tasks.plan.due import DatasetPlan, Plan
    from fleet_data.tasks.ingest.plates import PlatePlan
    from fleet_data.tasks.outputs.summary import estimate_text, headline_parts, plan_text
    from fleet_data.tasks.run.summary import PlateOutcome

    def plan(vins: int, plates: bool) -> Plan:
        datasets = {"specs": DatasetPlan("specs", "specs", vins, vins, 0, vins, "x", answered_before=0),
                    "recalls": DatasetPlan("recalls", "recalls", vins, vins, 0, vins, "x", answered_before=0)}
        return Plan("r", datasets, plates=PlatePlan(13, 12, 12, "p") if plates else None)

    first = plan(986, plates=True)
    ingest = {"rows_in": 1022, "valid": 986, "duplicates": 12, "rejected": 11, "plate_rows": 14, "plates_known": 0,
              "plates_waiting": 13}
    printed = plan_text(first)
    assert printed.splitlines()[0] == "Plan: 1984 units (+ up to 986 for recall campaign details) (+ up to 24 for the vehicles plates find)"
    assert "(12 plates on 13 rows to look up)" in printed
    running = RunSummary.start("r", ingest, first)
    running.add_plates(PlateOutcome(found=10, not_found=2, calls=12, units=10, valid=10, duplicates=1, rejected=2))
    again = plan(996, plates=False)
    said_again = plan_text(again, running.printed_plan())
    running.replan(again)
    summary = running.as_json()
    expected = ("estimated 2004 units (1984 planned + 20 for the vehicles the plates found, of up to 24 planned) "
                "(+ up to 996 for recall campaign details: 986 planned + 10 for the vehicles the plates found)")
    assert estimate_text(summary) == expected
    assert said_again.splitlines()[0] == "Plan with the vehicles the plates found: " + expected.removeprefix("estimated ")
    assert sum(int(r[5]) for r in rows(summary) if r[5]) == summary["estimated_units"] == 2004  # the table's est.
    assert headline_parts(summary)[1] == (
        "1022 rows in, 996 VINs, 13 duplicates, 13 rejected (14 rows with a plate instead of a VIN: 13 looked up "
        "(12 plates: 10 found, 2 not found), 1 rejected before any lookup)")


def test_no_change_is_said_only_where_a_change_could_have_shown():
    from fleet_data.tasks.outputs.summary import FIRST_ANSWERS, NO_CHANGE, NOTHING_ANSWERED, run_change_lines

    def summary(found: int, answered_before: int | None) -> dict:
        return {"datasets": {"specs": {"found": found, "no_data": 0, "answered_before": answered_before}},
                "changes": {"total": 0}}

    assert run_change_lines(summary(0, 5)) == [NOTHING_ANSWERED]  # a refused key, a refused plan: nothing came back
    assert run_change_lines(summary(40, 0)) == [FIRST_ANSWERS]  # a first run: nothing to compare with
    assert run_change_lines(summary(40, 3)) == [NO_CHANGE]
    assert run_change_lines(summary(40, None)) == [NO_CHANGE]  # not counted (a backfill): the plain words


def test_the_summary_says_which_service_answered_and_why_fresh_answers_were_asked_again():
    summary = {"run_id": "r", "status": "completed", "ingest": {}, "estimated_units": 3, "units": 3, "calls": 3,
               "service": "embedded sandbox",
               "datasets": {"specs": {"other_service": 2, "future_dated": 0, "stop_reason": None},
                            "history": {"other_service": 0, "future_dated": 1, "stop_reason": None}}}
    assert headline(summary).startswith("run r: completed (answers from the embedded sandbox: made up, for trying the tool)")
    assert notes(summary) == ["asked again, though within their freshness windows: 2 specs answers of another service, "
                              "1 history answers dated in the future (never fresh)"]
    summary["service"] = "https://api.carsxe.com"
    assert headline(summary).startswith("run r: completed (answers from https://api.carsxe.com)")
