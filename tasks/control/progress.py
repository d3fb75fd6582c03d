"""Progress of long work, reported by tasks and shown by whoever runs them.

Tasks call `advance`; the `fleet` command installs a reporter for where its stderr goes (`for_stderr`):
rich progress bars with an ETA on a terminal, plain lines elsewhere (a file, cron, CI, a pipe), at least
one every few seconds per piece of work under way. Deployments keep the default, which logs a line per
finished chunk through Prefect's logger instead.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Protocol


class Reporter(Protocol):
    def say(self, text: str) -> None: ...
    def start(self, key: str, description: str, total: int) -> None: ...
    def advance(self, key: str, amount: int = 1) -> None: ...
    def finish(self, key: str) -> None: ...


class Silent:
    def say(self, text: str) -> None:
        return None

    def start(self, key: str, description: str, total: int) -> None:
        return None

    def advance(self, key: str, amount: int = 1) -> None:
        return None

    def finish(self, key: str) -> None:
        return None


class RichBars:
    """Terminal progress bars; thread-safe, one bar per key."""

    def __init__(self) -> None:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self._progress = Progress(
            TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("ETA"), TimeRemainingColumn(), transient=False,
        )
        self._bars: dict[str, TaskID] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> "RichBars":
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def say(self, text: str) -> None:
        self._progress.console.print(text, highlight=False)

    def start(self, key: str, description: str, total: int) -> None:
        with self._lock:
            if key in self._bars:
                self._progress.update(self._bars[key], total=total, description=description)
            else:
                self._bars[key] = self._progress.add_task(description, total=total)

    def advance(self, key: str, amount: int = 1) -> None:
        with self._lock:
            if key in self._bars:
                self._progress.advance(self._bars[key], amount)

    def finish(self, key: str) -> None:
        with self._lock:
            if key in self._bars:
                bar = next(t for t in self._progress.tasks if t.id == self._bars[key])
                self._progress.update(bar.id, completed=bar.total)


EVERY_SECONDS = 5.0  # a line per piece of work under way at least this often: twice within the 10 s a log reader waits
STARTED = time.monotonic()  # the command's start, near enough (the CLI imports this early): the lines' time origin


@dataclass
class _Work:
    description: str
    total: int
    started: float
    done: int = 0
    said_done: int = field(default=-1)  # `done` when its last line was written


class PlainLines:
    """Progress as plain lines, for output that is not a terminal (a file, cron, CI, a worker's log).

    Every `every` seconds, one line per piece of work started and not complete: done/total, the rate so
    far and the time left at that rate; one line when a piece completes; and while nothing counted is under
    way (planning, landing, publishing, the lake and the report), a line saying it is still working. Lines
    are whole, never rewritten, and carry the time since the command started, so a log read later still
    tells the pace.
    """

    def __init__(self, out: IO[str] | None = None, every: float = EVERY_SECONDS,
                 clock: Callable[[], float] = time.monotonic, began: float | None = None):
        self._out, self._every, self._clock = out, every, clock
        self._began = clock() if began is None else began
        self._last_line = clock()
        self._last_done = ""  # the last piece of work completed, named in the still-working line
        self._work: dict[str, _Work] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "PlainLines":
        self._thread = threading.Thread(target=self._tick, name="progress-lines", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def say(self, text: str) -> None:
        with self._lock:
            self._write(text)

    def start(self, key: str, description: str, total: int) -> None:
        with self._lock:
            work = self._work.get(key)
            if work is None:
                self._work[key] = _Work(description, total, self._clock())
            else:
                work.description, work.total = description, total

    def advance(self, key: str, amount: int = 1) -> None:
        with self._lock:
            work = self._work.get(key)
            if work is None:
                return
            before = work.done
            work.done += amount
            if before < work.total <= work.done:
                self._write(self.line(work))

    def finish(self, key: str) -> None:
        with self._lock:
            work = self._work.get(key)
            if work is not None and work.done < work.total:
                work.done = work.total
                self._write(self.line(work))

    def lines_due(self) -> list[str]:
        """The lines of every piece of work under way (started, with something to do, not complete), or, with
        none under way and no line for a while, that it is still working."""
        with self._lock:
            lines = [self.line(w) for w in self._work.values() if 0 < w.total and w.done < w.total]
            now = self._clock()
            if not lines and now - self._last_line >= self._every:
                after = f" after {self._last_done}" if self._last_done else ""
                lines = [f"[{_clock_text(now - self._began)}] still working{after}"
                         f" (the last line {_clock_text(now - self._last_line)} ago)"]
            return lines

    def line(self, work: _Work) -> str:
        now = self._clock()
        elapsed = max(now - work.started, 1e-9)
        text = f"[{_clock_text(now - self._began)}] {work.description}: {work.done:,}/{work.total:,}"
        if work.done >= work.total:
            self._last_done = f"{work.description} ({_clock_text(now - self._began)})"
            return f"{text} done in {_clock_text(elapsed)}"
        rate = work.done / elapsed
        left = f"ETA {_clock_text((work.total - work.done) / rate)}" if rate > 0 else "ETA unknown (nothing done yet)"
        stalled = "; none since the last line" if work.said_done == work.done and work.done else ""
        work.said_done = work.done
        return f"{text} ({work.done / work.total:.0%}), {rate:,.1f}/s, {left}{stalled}"

    def _tick(self) -> None:
        while not self._stop.wait(self._every):
            due = self.lines_due()
            with self._lock:
                for line in due:
                    self._write(line)

    def _write(self, text: str) -> None:
        out = self._out or sys.stderr
        out.write("\n".join(line.rstrip() for line in text.splitlines()) + "\n")
        out.flush()
        self._last_line = self._clock()


def _clock_text(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


@contextlib.contextmanager
def still(what: str, out: IO[str] | None = None, every: float = EVERY_SECONDS) -> Iterator[None]:
    """A wait of unknown length, outside a terminal: `what…` now, then `[0:00:35] still what (for 0:00:10)` every
    few seconds (the time since the command started, as `PlainLines` says it)."""
    stream = out or sys.stderr
    began, done = time.monotonic(), threading.Event()

    def tick() -> None:
        while not done.wait(every):
            now = time.monotonic()
            stream.write(f"[{_clock_text(now - STARTED)}] still {what} (for {_clock_text(now - began)})\n")
            stream.flush()

    stream.write(f"{what}…\n")
    stream.flush()
    thread = threading.Thread(target=tick, name="progress-still", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=10)


def for_stderr(json: bool = False) -> RichBars | PlainLines | None:
    """The reporter for this command's stderr: bars on a terminal, plain lines elsewhere; none with --json
    (whose reader wants one JSON document and nothing beside it)."""
    if json:
        return None
    return RichBars() if sys.stderr.isatty() else PlainLines(began=STARTED)


_reporter: Reporter = Silent()


def use(reporter: Reporter) -> None:
    global _reporter
    _reporter = reporter


def current() -> Reporter:
    return _reporter
