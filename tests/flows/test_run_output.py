"""What `fleet refresh` prints when its output goes to files, as under cron, CI or a worker (issue 30, point 6).

One real refresh, in its own process as a user starts it (its own temporary Prefect server), of 60 sample VINs
and the sample's 14 rows with a plate instead of a VIN, against a sandbox answering in 300-400 ms with 2 calls
in flight per dataset, so fetching lasts well over 10 s. stderr and stdout are files: every line is whole (no
wrapping, no trailing space, no terminal codes); progress lines come at least every 10 s while the run works,
each saying done/total, the rate and the time left; the plan's numbers are the summary's; a first run says it
had nothing to compare with, not "no changes".
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

from fleet_data.connectors.sandbox import SandboxConfig, run_sandbox
from fleet_data.connectors.sandbox.faults import FaultConfig

from .conftest import SAMPLE, sample_rows

pytestmark = pytest.mark.timeout(900)  # one refresh with its own Prefect start: a minute or two on 2 busy cores
ROOT = Path(__file__).resolve().parents[2]
KEY = "output_test_key_3b9e"
STAMP = re.compile(r"^\[(\d+):(\d\d):(\d\d)\] ")
UNDER_WAY = re.compile(r"^\[\d+:\d\d:\d\d\] (?P<what>[^:]+): (?P<done>[\d,]+)/(?P<total>[\d,]+) \(\d+%\), [\d,.]+/s, "
                       r"ETA (\d+:\d\d:\d\d|unknown \(nothing done yet\))")
# A plan's line for a dataset (or the plates): its name, endpoint, calls and units.
PLAN_ROW = re.compile(r"^  (\S+) +/\S+ +\d+ (?:calls|VINs) +(\d+) units", re.MULTILINE)
DONE = re.compile(r"^\[\d+:\d\d:\d\d\] (?P<what>[^:]+): (?P<total>[\d,]+)/(?P=total) done in \d+:\d\d:\d\d$")


def _seconds(line: str) -> int | None:
    found = STAMP.match(line)
    return None if found is None else int(found[1]) * 3600 + int(found[2]) * 60 + int(found[3])


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory) -> SimpleNamespace:
    folder = tmp_path_factory.mktemp("logged")
    fleet, db = folder / "fleet.csv", folder / "fleet.duckdb"
    plates = pl.read_csv(SAMPLE, infer_schema=False).filter(pl.col("vin").is_null() & pl.col("plate").is_not_null())
    pl.concat([sample_rows(60), plates], how="diagonal").write_csv(fleet)
    with run_sandbox(SandboxConfig(faults=FaultConfig(latency_ms=(300.0, 400.0)))) as sandbox:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API_URL", "VDS_"))}
        # A Prefect home of its own; its temporary server may take minutes to start on a loaded box.
        env |= {"PYTHONPATH": str(ROOT), "VDS_BASE_URL": sandbox.url, "VDS_API_KEY": KEY,
                "PREFECT_HOME": str(folder / "prefect"), "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
        with (folder / "out.txt").open("w") as out, (folder / "err.txt").open("w") as err:
            done = subprocess.run([sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fleet), "--db", str(db),
                                   "--lake", "", "--concurrency", "2"], cwd=ROOT, env=env, stdout=out, stderr=err,
                                  timeout=600, check=False)
    err_text, out_text = (folder / "err.txt").read_text(), (folder / "out.txt").read_text()
    assert done.returncode == 0, err_text[-3000:]
    return SimpleNamespace(err=err_text, out=out_text, service=sandbox.url)


def test_every_line_is_whole_and_plain(logged_run):
    for text in (logged_run.err, logged_run.out):
        assert [line for line in text.splitlines() if line != line.rstrip()] == []  # no trailing space
        assert "\r" not in text and "\x1b" not in text and "…" not in text.replace("starting Prefect…", "")


def test_progress_lines_come_at_least_every_10_seconds_with_done_total_rate_and_eta(logged_run):
    lines = logged_run.err.splitlines()
    stamped = [(_seconds(line), line) for line in lines if _seconds(line) is not None]
    under_way = [UNDER_WAY.match(line) for _, line in stamped]
    assert sum(m is not None for m in under_way) >= 4, logged_run.err
    assert all(m["what"] and int(m["done"].replace(",", "")) <= int(m["total"].replace(",", ""))
               for m in under_way if m)
    # Fetching lasted over 10 s (what the test is for), and from the first progress line to the last no gap
    # between lines was longer than 10 s.
    spans = {}
    for at, line in stamped:
        match = UNDER_WAY.match(line) or DONE.match(line)
        if match and match["what"].startswith("Fetching"):
            first, _ = spans.get(match["what"], (at, at))
            spans[match["what"]] = (first, at)
    assert max(last - first for first, last in spans.values()) > 10, spans
    gaps = [later - earlier for (earlier, _), (later, _) in zip(stamped, stamped[1:])]
    assert max(gaps) <= 10, [line for _, line in stamped]
    assert {m["what"] for m in map(DONE.match, lines) if m} >= {"Fetching specs", "Fetching market_value"}


def test_the_plans_numbers_are_the_summarys(logged_run):
    # The plan names the service it will call (issue 26), as the summary's headline does.
    plan = re.search(rf"^Plan: (\d+) units from {re.escape(logged_run.service)} \(\+ up to (\d+) for recall campaign "
                     r"details\) \(\+ up to (\d+) for the vehicles plates find\)$", logged_run.err, re.MULTILINE)
    assert plan, logged_run.err
    assert re.search(rf"^run \S+: \w+ \(answers from {re.escape(logged_run.service)}\)$", logged_run.out,
                     re.MULTILINE), logged_run.out
    planned, details, ceiling = map(int, plan.groups())
    lookups, waiting = map(int, re.search(r"\((\d+) plates on (\d+) rows to look up\)$", logged_run.err,
                                          re.MULTILINE).groups())
    estimate = re.search(rf"^estimated (\d+) units \({planned} planned \+ (\d+) for the vehicles the plates found, "
                         rf"of up to {ceiling} planned\) \(\+ up to (\d+) for recall campaign details: {details} planned "
                         r"\+ (\d+) for the vehicles the plates found\)$", logged_run.out, re.MULTILINE)
    assert estimate, logged_run.out
    total, added, details_now, details_added = map(int, estimate.groups())
    assert total == planned + added and details_now == details + details_added and 0 < added <= ceiling
    # The plan made again once the plates found their vehicles says the same (on stderr, before the fetching).
    assert f"Plan with the vehicles the plates found: {total} units ({planned} planned + {added} " in logged_run.err
    # The table's estimates are the plans' (the plates' from the first, the datasets' from the one made again) and
    # add up to the headline's; every figure whole. Only the plans' rows are read: notes follow the table.
    first, again = (dict(PLAN_ROW.findall(block)) for block in logged_run.err.split("\nPlan with ")[:2])
    priced = {name: int(units) for name, units in (first | again).items()}
    table = logged_run.out.splitlines()
    start = next(i for i, line in enumerate(table) if line.startswith("dataset "))
    est = table[start].index("est.") + len("est.")  # numbers are right-aligned under their header
    body = [(line.split()[0], int(line[:est].split()[-1])) for line in table[start + 1:]
            if line.split() and line.split()[0] in priced]
    assert len(body) == len(priced) and dict(body) == priced and sum(priced.values()) == total, logged_run.out
    # The rows with a plate: the plan's lookups and rows are the summary's.
    assert re.search(rf" \(14 rows with a plate instead of a VIN: {waiting} looked up \({lookups} plates: \d+ found, "
                     r"\d+ not found\), 1 rejected before any lookup\)$", logged_run.out, re.MULTILINE), logged_run.out


def test_a_first_run_says_it_had_nothing_to_compare_with(logged_run):
    assert logged_run.out.splitlines()[0] == ("First answers for these vehicles: nothing to compare with yet (a change "
                                              "is a difference from a vehicle's previous answer).")
    assert "No changes" not in logged_run.out
