"""Progress outside a terminal: plain lines (done/total, rate, ETA) at least every few seconds; on a terminal, bars
with an ETA. The clock here is a fake one, moved by hand: the lines' figures are exact."""

from __future__ import annotations

import io
import re
import time

from fleet_data.tasks.control import progress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_piece_of_work_under_way_says_done_total_rate_and_time_left():
    clock, out = Clock(), io.StringIO()
    lines = progress.PlainLines(out, every=5, clock=clock)
    lines.start("specs", "Fetching specs", 1_000)
    clock.now += 10
    lines.advance("specs", 250)
    assert lines.lines_due() == ["[0:00:10] Fetching specs: 250/1,000 (25%), 25.0/s, ETA 0:00:30"]
    clock.now += 5  # nothing more came in: said so, the rate falls, the time left grows
    assert lines.lines_due() == ["[0:00:15] Fetching specs: 250/1,000 (25%), 16.7/s, ETA 0:00:45; none since the last line"]
    lines.advance("specs", 750)  # complete: a line of its own, at once, and no more after it
    assert out.getvalue() == "[0:00:15] Fetching specs: 1,000/1,000 done in 0:00:15\n"
    assert lines.lines_due() == []


def test_nothing_done_yet_has_no_rate_and_an_unknown_eta():
    clock = Clock()
    lines = progress.PlainLines(io.StringIO(), every=5, clock=clock)
    lines.start("recalls", "Recall batches", 991)
    clock.now += 6
    assert lines.lines_due() == ["[0:00:06] Recall batches: 0/991 (0%), 0.0/s, ETA unknown (nothing done yet)"]


def test_between_pieces_of_work_a_line_says_it_is_still_working():
    clock, out = Clock(), io.StringIO()
    lines = progress.PlainLines(out, every=5, clock=clock)
    lines.start("ingest", "Reading fleet files", 1)
    lines.finish("ingest")
    clock.now += 3
    assert lines.lines_due() == []  # a line 3 s ago: not yet
    clock.now += 4
    assert lines.lines_due() == ["[0:00:07] still working after Reading fleet files (0:00:00) (the last line 0:00:07 ago)"]


def test_lines_come_on_their_own_every_few_seconds_and_stop_with_the_command():
    out = io.StringIO()
    with progress.PlainLines(out, every=0.05) as lines:
        lines.start("specs", "Fetching specs", 10)
        lines.advance("specs", 1)
        deadline = time.monotonic() + 30
        while out.getvalue().count("Fetching specs: 1/10") < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    said = out.getvalue()
    assert said.count("Fetching specs: 1/10") >= 2 and re.search(r"1/10 \(10%\), [\d.]+/s, ETA \d+:\d\d:\d\d", said)
    time.sleep(0.2)
    assert out.getvalue() == said  # stopped with the command: nothing after it


def test_a_wait_of_unknown_length_is_said_again_until_it_ends():
    out = io.StringIO()
    with progress.still("starting Prefect", out, every=0.05):
        deadline = time.monotonic() + 30
        while "still starting Prefect" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
    assert re.match(r"starting Prefect…\n\[\d+:\d\d:\d\d\] still starting Prefect \(for 0:00:00\)\n", out.getvalue())


def test_the_terminals_bars_show_the_time_left():
    from rich.progress import TimeRemainingColumn

    bars = progress.RichBars()
    assert any(isinstance(column, TimeRemainingColumn) for column in bars._progress.columns)


def test_stderr_gets_bars_on_a_terminal_and_lines_elsewhere(monkeypatch):
    monkeypatch.setattr("sys.stderr", io.StringIO())  # not a terminal: a file, cron, CI
    assert isinstance(progress.for_stderr(), progress.PlainLines)
    assert progress.for_stderr(json=True) is None
