"""The answer journal: every call a chunk pays for, on disk before any landing, and before it is sent.

Each chunk appends to `staging/<run_id>/answers/<dataset>-<id>.arrows` (the suffix of the first format, kept:
`read_journal` tells the two apart by their first bytes), as things happen, one record at a time:

- a *sent* record before each attempt goes out (`CallIntent`: call id, VIN, endpoint, attempt, the units it
  may cost by the spec's pricing, and the recall batch it is about, if any);
- a *row* when its answer comes back (an `api_calls` row: status, units, latency, time) and, on the
  attempt that settled the VIN, its final answer (`outcome` found / no_data / failed / pending, the
  redacted body as JSON bytes, what was asked, the failure's message).

Each record goes to the OS whole, in one `write()`, with no fsync: a kill -9 cannot take back what the
OS has (only a machine crash can, and the records' checksums then tell what is left). A sent record is
written before its attempt goes out. A row is written with the next sent record, in the same `write()`
(the slot that settled it starts its next call at once, so that is the next thing it does), or, if no call
starts first, at the event loop's next turn, before it waits on anything: one write per call instead of
two, and a row is never held across a wait. So a kill loses no answer it waited for, and a call in flight
at the kill is a sent record without its row: it lands in `api_calls` as `billing = 'unknown'` with the
units it may have cost, since the service may have billed it. The ledger then never under-reports what
the service billed.

A record is framed: a 16-byte header (magic, kind, length, the header's CRC-32, the payload's CRC-32) and
its payload (JSON of the row's fields, then the body's bytes). Reading stops at the first record that is not
whole: a torn last record is what a kill leaves (normal); a bad record with bytes after it, a zeroed or
bit-flipped one, is damage (`Journal.damage`), and the lander quarantines the file after landing the
records before it (tasks/land/recover.py).

Besides the datasets' chunks, two journals hold calls that answer no dataset: plate lookups (`PLATE_LOOKUPS`:
each lookup's outcome on the row of its last call, what was asked as its request) and recall batch calls
(`BATCH_CALLS`: submit, status and results, each row naming its batch). Both are written by the flow's own
process, which lands their calls as it goes; a journal left by a kill lands what the store lacks.

The next run lands a journal left behind (tasks/land/recover.py `land_journals`), in the local staging folder
or, with `--staging s3://...`, on object storage (tasks/staging/area.py), under its original run id and
fetch times, in one transaction, then deletes the file. This module is the format: it imports neither
the fetch that writes it nor the landing that reads it. Landing is idempotent by key and the journal
keeps the call ids that land in `api_calls`, so a journal whose chunk landed just before the kill
lands again harmlessly.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
import uuid
import zlib
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from fleet_data.connectors import ENDPOINTS, CallRecord
from fleet_data.connectors.calls import CallIntent
from fleet_data.connectors.errors import MalformedResponseError
from fleet_data.connectors.redact import REDACTED

from fleet_data.tasks.staging.area import JOURNAL_SUFFIX
from fleet_data.tasks.datasets import DATASETS
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.control import resources
from fleet_data.tasks.control.failpoints import failpoint

FORMAT = "fleet-answers/2"
SUFFIX = JOURNAL_SUFFIX
_TS = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema([
    ("call_id", pa.string()),  # the `api_calls` key; null on a final answer no call preceded
    ("dataset", pa.string()),
    ("vin", pa.string()),
    ("endpoint", pa.string()),  # the endpoint's name (connectors.ENDPOINTS)
    ("path", pa.string()),  # as `api_calls.endpoint` has it
    ("method", pa.string()),
    ("attempt", pa.int32()),
    ("status", pa.int32()),  # null: no HTTP answer (timeout, dropped connection, killed in flight)
    ("units", pa.int32()),
    ("latency_ms", pa.float64()),
    ("error", pa.string()),  # the attempt's exception class
    ("called_at", _TS),
    ("outcome", pa.string()),  # null: an attempt that was retried; else the VIN's final answer
    ("answered_at", _TS),
    ("request", pa.string()),  # JSON of what was asked beyond the VIN (never the key)
    ("body", pa.binary()),  # the redacted answer as JSON bytes (found only)
    ("message", pa.string()),  # why it failed, or why the endpoint stopped (pending)
    ("retryable", pa.bool_()),
    ("billing", pa.string()),  # `api_calls.billing`: known, or unknown (no answer: `units` is what it may cost)
    ("batch_id", pa.string()),  # the recall batch a call was about (`api_calls.batch_id`); null for a VIN's call
])
# The fields a row record's JSON holds, in order: every column but the body.
_FIELDS = [f.name for f in SCHEMA if f.name not in ("dataset", "body")]
_TIMES = ("called_at", "answered_at")
UNKNOWN = "unknown"  # `billing` of a call whose answer never arrived
PLATE_LOOKUPS = "plate_lookups"  # the journal of a run's plate lookups (not a dataset: no table of answers)
BATCH_CALLS = "recall_batch_calls"  # the journal of a run's recall batch calls
NO_ANSWER = "NoAnswer"  # `error` of a call sent and never answered (the process died in flight)

_MAGIC = b"FLEETJ2\n"  # the file's first bytes (an Arrow stream, the first format, starts with 0xFFFFFFFF)
_FRAME = struct.Struct("<2sBxIII")  # magic, kind, pad, payload length, CRC-32 of the first 8 bytes, of the payload
_FRAME_HEAD = struct.Struct("<2sBxI")  # the first 8 bytes
_CRCS = struct.Struct("<II")
_SIZE = struct.Struct("<I")  # a row's JSON length, before its JSON and body
_FRAME_MAGIC = b"FJ"
_HEAD, _SENT, _ROW = 1, 2, 3  # record kinds
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_REDACTED_BYTES = REDACTED.encode()

Call = tuple[str, CallRecord, datetime, Any]  # as in ChunkResult.calls: (call_id, record, called_at, batch)


def _frame(kind: int, payload: bytes, *more: bytes) -> bytes:
    """One record: its header, then `payload` and `more` (parts of one payload, checksummed as one, copied once)."""
    crc, length = zlib.crc32(payload), len(payload)
    for part in more:
        crc, length = zlib.crc32(part, crc), length + len(part)
    head = _FRAME_HEAD.pack(_FRAME_MAGIC, kind, length)
    return b"".join((head, _CRCS.pack(zlib.crc32(head), crc), payload, *more))


def _micros(at: datetime | None) -> int | None:
    """Microseconds since the epoch (what the columns hold); a time without a zone is UTC, as Arrow takes it."""
    if at is None:
        return None
    since = (at if at.tzinfo else at.replace(tzinfo=timezone.utc)) - _EPOCH
    return (since.days * 86_400 + since.seconds) * 1_000_000 + since.microseconds


class AnswerJournal:
    """Append-only writer of one chunk's journal. Not thread-safe: one chunk's event loop writes it."""

    def __init__(self, path: Path, run_id: str, dataset: str, *, secrets: tuple[str, ...] = ()) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.run_id, self.dataset = path, run_id, dataset
        self.rows = 0  # rows written
        self._secrets = tuple(s for s in secrets if s)
        self._secret_bytes = tuple(s.encode() for s in self._secrets)
        self._rows: list[bytes] = []  # rows not yet written: they go with the next write, or at the loop's next turn
        self._turn = False  # a write of the rows is asked for at the loop's next turn
        # Unbuffered, appended: a record written is in the OS's hands, so it survives the process being killed.
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self._size = 0  # bytes on disk, every record whole
        self._held = bytearray()  # records a full disk refused, written again with the next one
        self.sent_count = 0  # sent records in the file
        self.before_sent: Callable[[], None] | None = None  # asked before each sent record (tasks/staging/mirror.py)
        head = orjson.dumps({"format": FORMAT, "run_id": run_id, "dataset": dataset})
        self._write(_MAGIC + _frame(_HEAD, head))

    @classmethod
    def create(cls, directory: Path, run_id: str, dataset: str, *, chunk: str | None = None,
               **options: Any) -> "AnswerJournal":
        """A new journal in `directory`, named `<chunk>-<id>` (`chunk` names the chunk's attempts alike:
        tasks/staging/attempts.py), else `<dataset>-<id>`."""
        return cls(directory / f"{chunk or dataset}-{uuid.uuid4().hex[:12]}{SUFFIX}", run_id, dataset, **options)

    # -- writing ------------------------------------------------------------------------------
    def sent(self, intent: CallIntent, at: datetime, batch: str | None = None) -> None:
        """An attempt about to go out: if no row for it follows, it was paid for perhaps, never answered.
        On disk when this returns, with every row before it. `batch`: the recall batch it belongs to, if any."""
        if self.before_sent is not None:
            self.before_sent()
        record = _frame(_SENT, orjson.dumps([intent.call_id, intent.vin, intent.endpoint, intent.path,
                                             intent.method, intent.attempt, intent.units, _micros(at), batch]))
        if self._rows:
            self._write_rows(record)
        else:
            self._write(record)
        self.sent_count += 1

    def attempt(self, call: Call) -> None:
        """An attempt that will be retried: only its `api_calls` row."""
        self._add(call, None, None, None, None, None, None, None)

    def answer(self, call: Call | None, vin: str | None, outcome: str, at: datetime, *, body: Any = None,
               request: dict[str, Any] | None = None, message: str | None = None,
               retryable: bool | None = None) -> None:
        """The VIN's final answer, on the row of the attempt that settled it."""
        data = None
        if body is not None:  # bytes: the answer as staged by the fetch; else a model's or a dict's JSON
            data = self._redact_bytes(body if isinstance(body, bytes) else _json_bytes(body))
        asked = json.dumps(request, default=str) if request else None
        self._add(call, vin, outcome, at, asked, data, self._redact(message) if message else None, retryable)

    # The client already redacts answers and messages; this is the last line before the disk.
    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def _redact_bytes(self, data: bytes) -> bytes:
        for secret in self._secret_bytes:
            if secret in data:
                data = data.replace(secret, _REDACTED_BYTES)
        return data

    def _add(self, call: Call | None, vin: str | None, outcome: str | None, answered_at: datetime | None,
             request: str | None, body: bytes | None, message: str | None, retryable: bool | None) -> None:
        answered = _micros(answered_at)
        batch = None
        if call is not None:
            call_id, record, called_at, batch = call
            fields = [call_id, record.vin or vin, record.endpoint, record.path, record.method, record.attempt,
                      record.status, record.units, record.latency_ms, record.error,
                      answered if called_at is answered_at else _micros(called_at)]
            billing: str | None = UNKNOWN if record.unknown else "known"
        else:
            fields = [None, vin, None, None, None, None, None, None, None, None, None]
            billing = None
        meta = orjson.dumps([*fields, outcome, answered, request, message, retryable, billing, batch,
                             body is not None])
        self._rows.append(_frame(_ROW, _SIZE.pack(len(meta)), meta, body or b""))
        self.rows += 1
        if self._turn:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # written from plain code: at once
            self._write_rows()
            return
        self._turn = True
        loop.call_soon(self._write_rows)

    def _write_rows(self, then: bytes = b"") -> None:
        """The rows not yet written, and `then` after them, in one write."""
        self._turn = False
        rows, self._rows = self._rows, []
        if not rows and not then:
            return
        self._write(b"".join(rows) + then if then else b"".join(rows))
        for _ in rows:
            failpoint("journal_flushed")  # crash tests: an answer is on disk, the chunk not done

    def _write(self, data: bytes, last: bool = False) -> None:
        """Append `data` (whole records) to the file. A disk found full halts the run and frees its reserve
        (tasks/control/resources.py), then the write is made again; should it fail still, the records stay in
        memory for the next write, and the journal's close raises."""
        if self._fd is None:
            raise ValueError(f"{self.path.name}: the journal is closed")
        if not self._held:  # the usual case: the OS takes the whole write at once
            try:
                done = os.write(self._fd, data)
            except OSError:
                done = 0  # made again below, where a refusal is handled
            if done == len(data):
                self._size += done
                return
            if done:
                os.ftruncate(self._fd, self._size)  # taken in part: the file goes back to its last whole record
        self._held += data
        try:
            self._put()
        except OSError as exc:
            if not resources.write_failed(self.run_id, exc):
                raise
            try:
                self._put()
            except OSError as again:
                if last:
                    raise resources.ResourceLost(f"{self.path.name}: answers paid for could not be written "
                                                 f"({again.strerror}); free some space") from again

    def _put(self) -> None:
        assert self._fd is not None
        view = memoryview(self._held)
        done = 0
        try:
            while done < len(view):  # a regular file takes it whole; a short write goes on where it stopped
                done += os.write(self._fd, view[done:])
        except OSError:
            os.ftruncate(self._fd, self._size)  # no torn record: the file ends at its last whole one
            raise
        finally:
            view.release()
        self._size += done
        self._held.clear()

    def flush(self) -> None:
        """Writes the rows not yet written, and again what a full disk refused, if any."""
        if self._rows:
            self._write_rows()
        if self._held and self._fd is not None:
            self._write(b"")

    def close(self) -> None:
        if self._fd is not None:
            try:
                if self._rows:
                    self._write_rows()
                if self._held:
                    self._write(b"", last=True)
            finally:
                os.close(self._fd)
                self._fd = None

    def delete(self) -> None:
        """The chunk has landed: its journal is no longer needed."""
        self.close()
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> "AnswerJournal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _json_bytes(body: Any) -> bytes:
    """The answer as JSON bytes: orjson (a tenth of json's cost on a specs answer), json for what it refuses."""
    try:
        return orjson.dumps(body)
    except TypeError:  # an integer beyond 64 bits, a key that is not a string
        return json.dumps(body, default=str).encode()


# -- reading ---------------------------------------------------------------------------------
@dataclass
class Journal:
    """What a journal file holds: every whole record up to the end, or up to the first damaged one.

    `damage`: why reading stopped before the end (a record zeroed, bit-flipped, or cut with bytes after it,
    or a header that is not a journal's), None when the file read whole; a torn last record, what a kill
    leaves, is not damage (`torn` says it was there). Calls sent and never answered are rows too, with
    `billing = 'unknown'`: in a damaged journal, those whose answer is in the unreadable part among them.
    """

    path: Path
    run_id: str
    dataset: str
    table: pa.Table
    damage: str | None = None
    torn: bool = False

    def final_answers(self) -> list[tuple[str, str]]:
        """(VIN, outcome) for every VIN whose answer the journal holds."""
        vins, outcomes = self.table.column("vin").to_pylist(), self.table.column("outcome").to_pylist()
        return [(v, o) for v, o in zip(vins, outcomes) if o is not None]

    def calls(self) -> list[Call]:
        """Every call the journal holds, as `api_calls` records it (one never answered: `unknown`), with its batch."""
        columns = self.table.select(["call_id", "vin", "endpoint", "path", "method", "attempt", "status", "units",
                                     "latency_ms", "error", "called_at", "outcome", "billing", "batch_id"])
        return [(row["call_id"], CallRecord(
                    endpoint=row["endpoint"], method=row["method"], path=row["path"], vin=row["vin"], status=row["status"],
                    attempt=row["attempt"], latency_ms=row["latency_ms"], units=row["units"], error=row["error"],
                    will_retry=row["outcome"] is None, call_id=row["call_id"], unknown=row["billing"] == UNKNOWN),
                 row["called_at"], row["batch_id"])
                for row in columns.to_pylist() if row["call_id"] is not None]

    def chunk_result(self) -> ChunkResult:
        """The chunk as `fetch_chunk` returned it: the same calls, answers, times and requests.

        Found answers are parsed again with the model the client used (`backfill --reparse` uses the
        same ones); one that no longer parses becomes a failure, and its raw answer still lands.
        """
        result = ChunkResult(self.dataset)
        model, path = ENDPOINTS[DATASETS[self.dataset].endpoint].model, ENDPOINTS[DATASETS[self.dataset].endpoint].path
        assert model is not None  # a dataset's endpoint answers JSON (only the batch CSV download has no model)
        columns = self.table.to_pydict()
        attempts: Counter[str] = Counter()
        for i in range(self.table.num_rows):
            vin = columns["vin"][i]
            if columns["call_id"][i] is not None:
                outcome = columns["outcome"][i]
                record = CallRecord(
                    endpoint=columns["endpoint"][i], method=columns["method"][i], path=columns["path"][i], vin=vin,
                    status=columns["status"][i], attempt=columns["attempt"][i], latency_ms=columns["latency_ms"][i],
                    units=columns["units"][i], error=columns["error"][i], will_retry=outcome is None,
                    call_id=columns["call_id"][i], unknown=columns["billing"][i] == UNKNOWN,
                )
                result.calls.append((columns["call_id"][i], record, columns["called_at"][i], None))
                attempts[vin] += 1
            outcome, at = columns["outcome"][i], columns["answered_at"][i]
            if outcome == "found":
                try:
                    answer = model.from_payload(json.loads(columns["body"][i]), DATASETS[self.dataset].endpoint)
                except (MalformedResponseError, ValueError) as exc:
                    result.failed.append(_failure(vin, self.dataset, 200, str(exc), False, attempts[vin], at,
                                                 columns["path"][i] or path))
                    continue
                result.found.append((vin, answer, at))
                result.requests[vin] = json.loads(columns["request"][i]) if columns["request"][i] else {}
            elif outcome == "no_data":
                result.no_data.append((vin, at))
            elif outcome == "failed":
                result.failed.append(_failure(vin, self.dataset, columns["status"][i], columns["message"][i],
                                              columns["retryable"][i], attempts[vin] or 1, at, columns["path"][i] or path))
            elif outcome == "pending":
                result.pending.append(vin)
                result.stop_reason = result.stop_reason or columns["message"][i]
        return result


def _failure(vin: str, dataset: str, status: int | None, message: str | None, retryable: bool | None,
             attempts: int, at: datetime, path: str | None) -> dict[str, Any]:
    return {"vin": vin, "dataset": dataset, "status": status, "message": message, "retryable": retryable,
            "attempts": attempts, "fetched_at": at, "endpoint": path}


def read_journal(path: Path) -> Journal:
    """Every whole record of a journal, up to its end or to the first damaged record (`Journal.damage`).

    Never raises on what a file holds: a journal cut by a kill reads back to its last whole record, and a
    damaged one to the record before the damage.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        return _records(path, {}, [], damage=f"unreadable: {exc}")
    if data.startswith(_MAGIC):
        return _read_records(path, data)
    if data[:4] == b"\xff\xff\xff\xff" or not data.strip(b"\0"):
        if data and not data.strip(b"\0"):
            return _records(path, {}, [], damage=f"zeroed: {len(data)} bytes, every one 0")
        return _read_arrow_stream(path)  # the first format (fleet-answers/1), or an empty file
    if _MAGIC.startswith(data):
        return _records(path, {}, [], torn=True)  # killed while its first bytes were written: nothing sent yet
    return _records(path, {}, [], damage="not a journal: its first bytes are neither format's")


def _read_records(path: Path, data: bytes) -> Journal:
    """The records of a fleet-answers/2 file (module docstring), checked one by one."""
    meta: dict[str, Any] = {}
    rows: list[tuple[list[Any], bytes | None]] = []
    sent: dict[str, list[Any]] = {}
    at, end = len(_MAGIC), len(data)
    damage, torn = None, False
    view = memoryview(data)  # records read in place: a body is copied once, into its row
    while at < end:
        frame = data[at:at + _FRAME.size]
        if len(frame) < _FRAME.size:
            if _FRAME_MAGIC.startswith(frame[:2]) and any(frame):
                torn = True
            else:
                damage = f"bad record header at byte {at} (of {end})"
            break
        magic, kind, length, head_crc, crc = _FRAME.unpack(frame)
        if magic != _FRAME_MAGIC or zlib.crc32(frame[:8]) != head_crc:
            damage = f"bad record header at byte {at} (of {end}){' (zeroed)' if not any(frame) else ''}"
            break
        start = at + _FRAME.size
        if start + length > end:  # the header is sound, so its length is: the record was being written
            torn = True
            break
        payload = view[start:start + length]
        if zlib.crc32(payload) != crc:
            damage = f"checksum mismatch in the record at byte {at} (of {end})"
            break
        try:
            _take(kind, payload, meta, rows, sent)
        except (ValueError, TypeError, IndexError, struct.error) as exc:
            damage = f"unreadable record at byte {at} (of {end}): {exc}"
            break
        at = start + length
    return _records(path, meta, rows, sent, damage=damage, torn=torn)


def _take(kind: int, payload: memoryview, meta: dict[str, Any], rows: list, sent: dict[str, list[Any]]) -> None:
    if kind == _HEAD:
        meta.update(orjson.loads(payload))
    elif kind == _SENT:
        intent = orjson.loads(payload)
        sent[intent[0]] = intent
    elif kind == _ROW:
        (size,) = struct.unpack_from("<I", payload)
        fields = orjson.loads(payload[4:4 + size])
        has_body = fields.pop()
        if len(fields) == len(_FIELDS) - 1:  # written before rows named their batch
            fields.append(None)
        if len(fields) != len(_FIELDS):
            raise ValueError(f"{len(fields)} fields, not {len(_FIELDS)}")
        rows.append((fields, bytes(payload[4 + size:]) if has_body else None))
    else:
        raise ValueError(f"unknown record kind {kind}")


def _records(path: Path, meta: dict[str, Any], rows: list[tuple[list[Any], bytes | None]],
             sent: dict[str, list[Any]] | None = None, *, damage: str | None = None, torn: bool = False) -> Journal:
    """The journal's table: its rows, then a row per call sent that no row answered (`billing` unknown)."""
    answered = {fields[0] for fields, _ in rows}
    for intent in (sent or {}).values():
        call_id, vin, endpoint, route, method, attempt, units, called = intent[:8]
        batch = intent[8] if len(intent) > 8 else None  # written before sent records named their batch: none
        if call_id not in answered:
            rows.append(([call_id, vin, endpoint, route, method, attempt, None, units, None, NO_ANSWER, called,
                          None, None, None, None, None, UNKNOWN, batch], None))
    dataset = meta.get("dataset") or path.name.split("-", 1)[0]
    columns: dict[str, list[Any]] = {name: [fields[i] for fields, _ in rows] for i, name in enumerate(_FIELDS)}
    columns["dataset"] = [dataset] * len(rows)
    columns["body"] = [body for _, body in rows]
    arrays = [pa.array(columns[f.name], pa.int64()).cast(_TS) if f.name in _TIMES else pa.array(columns[f.name], f.type)
              for f in SCHEMA]
    return Journal(path, meta.get("run_id") or path.parent.parent.name, dataset,
                   pa.Table.from_arrays(arrays, schema=SCHEMA), damage, torn)


def _read_arrow_stream(path: Path) -> Journal:
    """A journal of the first format (an Arrow IPC stream, batches every 20 ms), left by a run of an older version:
    every complete batch; a batch cut short by a kill is dropped."""
    batches: list[pa.RecordBatch] = []
    schema = None
    try:
        with pa.OSFile(str(path), "rb") as source:
            reader = pa.ipc.open_stream(source)
            schema = reader.schema
            while True:
                try:
                    batches.append(reader.read_next_batch())
                except StopIteration:
                    break
                except (pa.ArrowInvalid, OSError):
                    break  # the last batch was being written when the process died
    except (pa.ArrowInvalid, OSError):
        pass  # killed before the header was whole: nothing was answered yet
    meta = {k.decode(): v.decode() for k, v in ((schema.metadata if schema else None) or {}).items()}
    dataset = meta.get("dataset") or path.name.split("-", 1)[0]
    old = pa.Table.from_batches(batches, schema=schema) if batches else None
    columns = [old.column(f.name) if old is not None and f.name in old.column_names
               else pa.nulls(old.num_rows if old is not None else 0, f.type) for f in SCHEMA]
    table = pa.Table.from_arrays(columns, schema=SCHEMA)
    return Journal(path, meta.get("run_id") or path.parent.parent.name, dataset, table)


# -- recovery -------------------------------------------------------------------------------
def leftover_journals(staging_root: Path, *, besides: str | None = None) -> Iterator[Path]:
    """Journals left under `staging/<run>/answers/` by runs other than `besides`."""
    for path in sorted(staging_root.glob(f"*/answers/*{SUFFIX}")):
        if path.parent.parent.name != besides:
            yield path


def worth_landing(answers: pa.Table) -> bool:
    """Whether a journal's rows hold anything to land: a call paid for, or a failure (a chunk stopped before
    its first call holds only pending VINs)."""
    if not answers.num_rows:
        return False
    return bool(pc.any(pc.is_valid(answers.column("call_id"))).as_py()
                or pc.any(pc.equal(answers.column("outcome"), "failed")).as_py())

