"""Progress of long work, reported by tasks and shown by whoever runs them.

Tasks call `advance`; the `fleet` command installs a terminal reporter (rich
progress bars) when it runs on a terminal. Deployments keep the default, which
logs a line per finished chunk through Prefect's logger instead.
"""

from __future__ import annotations

import threading
from typing import Protocol


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
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=False
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


_reporter: Reporter = Silent()


def use(reporter: Reporter) -> None:
    global _reporter
    _reporter = reporter


def current() -> Reporter:
    return _reporter
