"""A running chunk's journal, kept on object storage while it is written (`--staging s3://...`).

A fetch task bound for object storage journals in this machine's scratch folder (tasks/staging/area.py
`journal_folder`) and puts the file there once its chunk is done. A Dask worker lost mid-chunk would keep those
calls on its disk, and the task's re-run on another machine could not see them. So while the chunk runs, a copy of
its journal is put beside where the finished one goes:

- once before the first call goes out (the attempt's claim: a re-run knows there was an attempt before it);
- every `SECONDS` while the file grows;
- and at once whenever the calls sent since the last copy reach `AHEAD`: the next call waits for that copy. So a
  copy is never more than `AHEAD` calls behind the file, and a re-run that finds it counts at most that many
  calls it cannot see (tasks/staging/attempts.py), as `unknown`: the ledger never holds less than was billed.

The finished journal's put replaces the copy. The first copy that cannot be put ends the copies; the call that then
waits for one raises what failed (the object store gone: the run's halt, ResourceLost, exit code 9), so no call goes
further than `AHEAD` past the last copy in place.
"""

from __future__ import annotations

import logging
import threading

from fleet_data.tasks.staging.area import StorageAccess, put_copy
from fleet_data.tasks.staging.journal import AnswerJournal

SECONDS = 1.0  # a copy at least this often while the journal grows
AHEAD = 64  # calls a copy may be behind the file; a re-run counts this many, at most, as unknown

_log = logging.getLogger(__name__)


class Mirror:
    """Keeps the object-storage copy of one journal in step while its chunk runs (a context manager: the first copy
    on entry, no more after exit, before the finished journal is put); `before_send` is the journal's hook before
    each sent record."""

    def __init__(self, journal: AnswerJournal, staging: str, access: StorageAccess | None = None):
        self.journal, self.path, self.staging, self.access = journal, journal.path, staging, access
        self._size = -1  # the file's size at the last copy
        self._allowed = 0  # sends allowed before the next copy must be in place
        self._wanted = threading.Event()  # a copy is asked for now
        self._stopped = threading.Event()
        self._done = threading.Condition()
        self._copies = 0  # copies put (each one counts under `_done`)
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Mirror":
        """The first copy (the claim), before any call goes out; then the timer's, and the journal's hook."""
        self._put()  # raises the run's halt when the store does not answer
        self._thread = threading.Thread(target=self._run, name=f"mirror {self.path.name}", daemon=True)
        self._thread.start()
        self.journal.before_sent = self.before_send
        return self

    def __exit__(self, *exc: object) -> None:
        self.journal.before_sent = None
        self.stop()

    @property
    def sent(self) -> int:
        return self.journal.sent_count

    def before_send(self) -> None:
        """Called before each sent record is written: waits for a copy when this call would be more than `AHEAD`
        calls past the last one; asks for one early, at half that, so that it seldom waits."""
        if self.sent >= self._allowed - AHEAD // 2:
            self._wanted.set()
        if self.sent < self._allowed:
            return
        with self._done:
            seen = self._copies
            self._wanted.set()
            while self.sent >= self._allowed:
                if self._failure is not None:
                    raise self._failure
                if self._stopped.is_set():
                    return
                self._done.wait(timeout=SECONDS)
                if self._copies == seen:
                    self._wanted.set()

    def stop(self) -> None:
        """No more copies (the finished journal's put follows, and must not be overwritten by a late copy)."""
        self._stopped.set()
        self._wanted.set()
        if self._thread is not None:
            self._thread.join()
        with self._done:
            self._done.notify_all()

    def _run(self) -> None:
        while not self._stopped.is_set():
            asked = self._wanted.wait(timeout=SECONDS)
            self._wanted.clear()
            if self._stopped.is_set():
                return
            try:
                self._put(asked)
            except BaseException as exc:  # noqa: BLE001 - told to the call waiting for it, if any
                _log.debug("%s: copy not put (%s)", self.path.name, exc)
                with self._done:
                    self._failure = exc
                    self._done.notify_all()
                return

    def _put(self, asked: bool = True) -> None:
        sent = self.sent  # read before the file: every record it counts is in the bytes read next
        data = self.path.read_bytes()
        if not asked and len(data) == self._size:
            return  # the timer's, and nothing new
        put_copy(data, self.path.name, self.staging, self.journal.run_id, self.access)
        self._size = len(data)
        with self._done:
            self._allowed = sent + AHEAD
            self._copies += 1
            self._done.notify_all()

