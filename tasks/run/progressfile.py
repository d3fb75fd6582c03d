"""The live run's progress file, `<db>.progress.json`: what `fleet status` shows of a run in flight.

The run holding the lock keeps it (written whole to a temporary file, then renamed: a reader never
sees half of it): run id, PID, command, start, phase, per dataset done/total, and when it last
published. Readers never open the working store for this. A run counts as live only while the
file's PID is alive and holds the lock; a file left by a killed run just describes a dead one.
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fleet_data.tasks.control.resources import is_disk_full
from fleet_data.tasks.run import lock as runlock

WRITE_EVERY = 0.5  # seconds between rewrites while counts move; phases and publishes are written at once


def progress_path(db: str | Path) -> Path:
    return Path(str(db) + ".progress.json")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class ProgressFile:
    """Kept by the run holding the lock; also a progress Reporter (tee'd beside the terminal's bars)."""

    def __init__(self, db: str | Path, run_id: str, command: str, started: str):
        self.path = progress_path(db)
        self.state: dict[str, Any] = {
            "run_id": run_id, "pid": os.getpid(), "command": command, "started": started, "phase": "starting",
            "datasets": {}, "last_publish": None, "publishes": 0, "updated": None,
        }
        self._lock = threading.Lock()
        self._written = 0.0
        self.write(force=True)

    def write(self, force: bool = False) -> None:
        with self._lock:
            if not force and time.monotonic() - self._written < WRITE_EVERY:
                return
            self._written = time.monotonic()
            self.state["updated"] = _now()
            temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            try:
                temporary.write_text(json.dumps(self.state, default=str), encoding="utf-8")
                os.replace(temporary, self.path)
            except OSError as exc:
                temporary.unlink(missing_ok=True)
                if not is_disk_full(exc):
                    raise
                # A full disk: the run halts on its own writes (tasks/control/resources.py); this file only informs.

    def phase(self, phase: str) -> None:
        with self._lock:
            self.state["phase"] = phase
        self.write(force=True)

    def published(self, at: datetime) -> None:
        with self._lock:
            self.state["last_publish"] = at.isoformat(timespec="seconds")
            self.state["publishes"] += 1
        self.write(force=True)

    def remove(self) -> None:
        with self._lock:
            self.path.unlink(missing_ok=True)

    # -- Reporter ------------------------------------------------------------------------------
    def say(self, text: str) -> None:
        return None

    def start(self, key: str, description: str, total: int) -> None:
        """A bar begins, or (started again) learns its new total: what it has done so far stays, as RichBars
        keeps it (recall details are counted in as each batch lands, while the first ones are looked up)."""
        with self._lock:
            self.state["phase"] = "ingest" if key == "ingest" else "reparse" if key.startswith("reparse:") else "fetch"
            done = self.state["datasets"].get(key, {}).get("done", 0)
            self.state["datasets"][key] = {"description": description, "done": done, "total": total}
        self.write(force=True)

    def advance(self, key: str, amount: int = 1) -> None:
        with self._lock:
            if key in self.state["datasets"]:
                self.state["datasets"][key]["done"] += amount
        self.write()

    def finish(self, key: str) -> None:
        with self._lock:
            if key in self.state["datasets"]:
                entry = self.state["datasets"][key]
                entry["done"] = entry["total"]
        self.write(force=True)


class Tee:
    """A Reporter that tells two others (the terminal's bars and the progress file)."""

    def __init__(self, first: Any, second: Any):
        self.first, self.second = first, second

    def say(self, text: str) -> None:
        self.first.say(text)
        self.second.say(text)

    def start(self, key: str, description: str, total: int) -> None:
        self.first.start(key, description, total)
        self.second.start(key, description, total)

    def advance(self, key: str, amount: int = 1) -> None:
        self.first.advance(key, amount)
        self.second.advance(key, amount)

    def finish(self, key: str) -> None:
        self.first.finish(key)
        self.second.finish(key)


def read_progress(db: str | Path) -> dict[str, Any] | None:
    try:
        data = json.loads(progress_path(db).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def live_run(db: str | Path) -> dict[str, Any] | None:
    """The run in flight on `db`, from its progress file, if its process is alive and holds the lock."""
    progress = read_progress(db)
    if not progress or not isinstance(progress.get("pid"), int) or not runlock.holds(db, progress["pid"]):
        return None
    return progress
