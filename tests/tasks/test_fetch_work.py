"""What one call makes the fetching process do, counted rather than timed (tests/bench times it).

A chunk fetched as a fetch task fetches it (`run_calls`, a journal), against the sandbox over loopback. The
counts are the work itself, so they hold on a busy machine: writes to the journal, and Python functions
entered in the fetching thread (client, scheduler, journal and whatever they run per call). The bounds
sit well above what the code does and well below what it did (docs/benchmarks.md has both).
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from typing import Any

from fleet_data.connectors.transport import run_calls
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.fetch.enrich import fetch_chunk
from fleet_data.tasks.staging.journal import AnswerJournal, read_journal
from tests.bench.compare.fleets import fleet_vins

N = 300


def test_a_call_costs_one_journal_write_and_a_bounded_number_of_python_calls(sandbox, settings, tmp_path, monkeypatch):
    vins = fleet_vins(N + 20)
    rows = [{"vin": v} for v in vins[N:]]

    async def fetch(rows: list[dict[str, Any]], name: str) -> Any:
        with AnswerJournal.create(tmp_path / name, "run-work", "specs", secrets=(settings().api_key,)) as journal:
            result = await fetch_chunk("specs", rows, calls=Calls(settings=settings(), concurrency=16), journal=journal)
        return result, journal.path

    run_calls(fetch(rows, "warm"))  # imports, the sandbox's answers cached: paid before counting
    writes: Counter[str] = Counter()
    names: dict[int, str] = {}
    write = os.write

    def counting_write(fd: int, data: Any) -> int:
        if fd not in names:
            names[fd] = os.path.realpath(f"/proc/self/fd/{fd}")  # the file written to
        writes[names[fd]] += 1
        return write(fd, data)

    entered = Counter[str]()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":  # a function entered, or a coroutine resumed
            entered[frame.f_code.co_filename] += 1

    monkeypatch.setattr(os, "write", counting_write)
    sys.setprofile(profile)
    try:
        result, path = run_calls(fetch([{"vin": v} for v in vins[:N]], "counted"))
    finally:
        sys.setprofile(None)
        monkeypatch.undo()
    assert len(result.found) + len(result.no_data) == N and not result.failed
    journal = read_journal(path)
    assert journal.damage is None and len(journal.final_answers()) == N  # every answer on disk, as before

    # A sent record per call goes out in its own write, and each answer's row with the next one: about one
    # write per call (the head, and the rows of the last answers, add a few). Before: two per call.
    assert writes[os.path.realpath(path)] <= N + N // 10 + 2, writes
    # Python functions entered per call, everything in the fetching thread included (the event loop's too).
    # Now about 115; with aiohttp's client on asyncio's loop, about 300.
    per_call = sum(entered.values()) / N
    assert per_call <= 180, entered.most_common(15)
