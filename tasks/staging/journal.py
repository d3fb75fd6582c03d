"""The answer journal: every call a chunk pays for, on disk before any landing.

A chunk's answers used to live only in memory until its landing committed, so a kill -9 or a
failed landing lost calls that were paid for, and the next run bought them again. Now each chunk
appends what it receives to an Arrow IPC stream file, `staging/<run_id>/answers/<dataset>-<id>.arrows`:
one row per call attempt (an `api_calls` row: call id, endpoint, status, units, attempt, latency,
time) and, on the attempt that settled the VIN, its final answer (`outcome` found / no_data / failed
/ pending, the redacted body as JSON bytes, what was asked, the failure's message).

Writes are group-committed: rows are appended to column lists, and one record batch takes every
row that arrived since the last, at most `FLUSH_INTERVAL` later (or at `batch_rows` rows). A kill
loses the calls in flight and the answers of that last interval, no more: with an interval shorter
than a call's latency, at most one more answer per call slot. An IPC stream reads back up to its
last complete batch after a kill.

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
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from fleet_data.connectors import ENDPOINTS, CallRecord
from fleet_data.connectors.errors import MalformedResponseError
from fleet_data.connectors.redact import REDACTED

from fleet_data.tasks.staging.area import JOURNAL_SUFFIX
from fleet_data.tasks.datasets import DATASETS
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.control import resources
from fleet_data.tasks.control.failpoints import failpoint

FORMAT = "fleet-answers/1"
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
    ("status", pa.int32()),  # null: no HTTP answer (timeout, dropped connection)
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
])
# Seconds between two batches at most. A batch per answer would cost a third of a call's CPU; one
# per 20 ms costs little (a few µs per answer), and loses little to a kill.
FLUSH_INTERVAL = 0.02

Call = tuple[str, CallRecord, datetime, Any]  # as in ChunkResult.calls: (call_id, record, called_at, batch)


class AnswerJournal:
    """Append-only writer of one chunk's journal. Not thread-safe: one chunk's event loop writes it."""

    def __init__(self, path: Path, run_id: str, dataset: str, *, secrets: tuple[str, ...] = (),
                 batch_rows: int = 256) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.run_id, self.dataset = path, run_id, dataset
        self.rows = 0  # rows written or waiting
        self._secrets = tuple(s for s in secrets if s)
        self._batch_rows = batch_rows
        self._schema = SCHEMA.with_metadata({"format": FORMAT, "run_id": run_id, "dataset": dataset})
        # Each batch goes to the OS as it is written, so it survives the process being killed.
        self._sink = WholeWrites(path)
        self._writer = pa.ipc.new_stream(pa.PythonFile(self._sink, mode="w"), self._schema)
        self._columns: tuple[list[Any], ...] = tuple([] for _ in SCHEMA)
        self._flush_timer: asyncio.TimerHandle | None = None
        self._flushed_at = 0.0
        self._closed = False

    @classmethod
    def create(cls, directory: Path, run_id: str, dataset: str, **options: Any) -> "AnswerJournal":
        return cls(directory / f"{dataset}-{uuid.uuid4().hex[:12]}{SUFFIX}", run_id, dataset, **options)

    # -- writing ------------------------------------------------------------------------------
    def attempt(self, call: Call) -> None:
        """An attempt that will be retried: only its `api_calls` row."""
        self._add(call, None, None, None, None, None, None, None)

    def answer(self, call: Call | None, vin: str, outcome: str, at: datetime, *, body: Any = None,
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
        for secret in self._secrets:
            if secret.encode() in data:
                data = data.replace(secret.encode(), REDACTED.encode())
        return data

    def _add(self, call: Call | None, vin: str | None, outcome: str | None, answered_at: datetime | None,
             request: str | None, body: bytes | None, message: str | None, retryable: bool | None) -> None:
        (call_ids, datasets, vins, endpoints, paths, methods, attempts, statuses, units, latencies, errors,
         called, outcomes, answered, requests, bodies, messages, retryables) = self._columns
        if call is not None:
            call_id, record, called_at, _ = call
            call_ids.append(call_id)
            vins.append(record.vin or vin)
            endpoints.append(record.endpoint)
            paths.append(record.path)
            methods.append(record.method)
            attempts.append(record.attempt)
            statuses.append(record.status)
            units.append(record.units)
            latencies.append(record.latency_ms)
            errors.append(record.error)
            called.append(called_at)
        else:
            for column in (call_ids, endpoints, paths, methods, attempts, statuses, units, latencies, errors, called):
                column.append(None)
            vins.append(vin)
        datasets.append(self.dataset)
        outcomes.append(outcome)
        answered.append(answered_at)
        requests.append(request)
        bodies.append(body)
        messages.append(message)
        retryables.append(retryable)
        self.rows += 1
        self._after_add()

    def _after_add(self) -> None:
        if len(self._columns[0]) >= self._batch_rows:
            self.flush()
            return
        if self._flush_timer is not None:
            return  # this row goes with the batch already due
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop: written every `batch_rows` rows and on close
        # As soon as the loop has handled the answers that are ready, unless the last batch was
        # written less than an interval ago: then at the end of that interval.
        self._flush_timer = loop.call_at(max(loop.time(), self._flushed_at + FLUSH_INTERVAL), self.flush)

    def flush(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if self._closed or not self._columns[0]:
            return
        self._flushed_at = _loop_time()
        rows = len(self._columns[0])
        arrays = [_array(column, field.type, rows) for column, field in zip(self._columns, SCHEMA)]
        self._writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self._schema))
        for column in self._columns:
            column.clear()
        self._commit()
        failpoint("journal_flushed")  # crash tests: a batch of answers is on disk, the chunk not done

    def _commit(self, last: bool = False) -> None:
        """Put the batches written on disk. A disk found full halts the run and frees its reserve
        (tasks/control/resources.py), then the write is made again; should it fail still, the batches stay
        in memory for the next flush, and the last one raises."""
        try:
            self._sink.commit()
        except OSError as exc:
            if not resources.write_failed(self.run_id, exc):
                raise
            try:
                self._sink.commit()
            except OSError as again:
                if last:
                    raise resources.ResourceLost(f"{self.path.name}: answers paid for could not be written "
                                                 f"({again.strerror}); free some space") from again

    def close(self) -> None:
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._writer.close()
        try:
            self._commit(last=True)
        finally:
            self._sink.close()

    def delete(self) -> None:
        """The chunk has landed: its journal is no longer needed."""
        self.close()
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> "AnswerJournal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WholeWrites:
    """The journal's file, as the Arrow writer's sink: what it writes is held until `commit` puts it on disk
    whole, or not at all (a write refused for space is cut back), so it can be made again later."""

    closed = False

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.size = 0  # bytes on disk
        self._held = bytearray()

    def write(self, data: Any) -> int:
        self._held += data
        return len(data)

    def tell(self) -> int:
        return self.size + len(self._held)

    def flush(self) -> None:
        pass  # `commit` is the flush: the Arrow writer's own would come between the parts of a batch

    def commit(self) -> None:
        done, view = 0, memoryview(self._held)
        try:
            while done < len(view):
                done += os.pwrite(self._fd, view[done:], self.size + done)
        except OSError:
            os.ftruncate(self._fd, self.size)  # no torn batch: the file ends at its last whole one
            raise
        finally:
            view.release()
        self.size += done
        self._held.clear()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self._fd)


def _array(column: list[Any], kind: pa.DataType, rows: int) -> pa.Array:
    """One column of a batch. Most of a chunk's columns hold one value throughout (its dataset, endpoint,
    status; nulls where nothing failed): repeating it costs a fraction of converting every cell, and a
    batch is a dozen columns of a few rows, written every 20 ms (measured: 700 to 300 µs for 16 rows)."""
    first = column[0]
    if column.count(first) != rows:
        return pa.array(column, type=kind)
    return pa.nulls(rows, kind) if first is None else pa.repeat(pa.scalar(first, kind), rows)


def _json_bytes(body: Any) -> bytes:
    """The answer as JSON bytes: orjson (a tenth of json's cost on a specs answer), json for what it refuses."""
    try:
        return orjson.dumps(body)
    except TypeError:  # an integer beyond 64 bits, a key that is not a string
        return json.dumps(body, default=str).encode()


def _loop_time() -> float:
    """The running loop's clock (what `call_at` counts in), or the same monotonic clock outside one."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


# -- reading ---------------------------------------------------------------------------------
@dataclass
class Journal:
    """What a journal file holds, up to its last complete batch."""

    path: Path
    run_id: str
    dataset: str
    table: pa.Table

    def final_answers(self) -> list[tuple[str, str]]:
        """(VIN, outcome) for every VIN whose answer the journal holds."""
        vins, outcomes = self.table.column("vin").to_pylist(), self.table.column("outcome").to_pylist()
        return [(v, o) for v, o in zip(vins, outcomes) if o is not None]

    def chunk_result(self) -> ChunkResult:
        """The chunk as `fetch_chunk` returned it: the same calls, answers, times and requests.

        Found answers are parsed again with the model the client used (`backfill --reparse` uses the
        same ones); one that no longer parses becomes a failure, and its raw answer still lands.
        """
        result = ChunkResult(self.dataset)
        model = ENDPOINTS[DATASETS[self.dataset].endpoint].model
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
                )
                result.calls.append((columns["call_id"][i], record, columns["called_at"][i], None))
                attempts[vin] += 1
            outcome, at = columns["outcome"][i], columns["answered_at"][i]
            if outcome == "found":
                try:
                    answer = model.from_payload(json.loads(columns["body"][i]), DATASETS[self.dataset].endpoint)
                except (MalformedResponseError, ValueError) as exc:
                    result.failed.append(_failure(vin, self.dataset, 200, str(exc), False, attempts[vin], at))
                    continue
                result.found.append((vin, answer, at))
                result.requests[vin] = json.loads(columns["request"][i]) if columns["request"][i] else {}
            elif outcome == "no_data":
                result.no_data.append((vin, at))
            elif outcome == "failed":
                result.failed.append(_failure(vin, self.dataset, columns["status"][i], columns["message"][i],
                                              columns["retryable"][i], attempts[vin] or 1, at))
            elif outcome == "pending":
                result.pending.append(vin)
                result.stop_reason = result.stop_reason or columns["message"][i]
        return result


def _failure(vin: str, dataset: str, status: int | None, message: str | None, retryable: bool | None,
             attempts: int, at: datetime) -> dict[str, Any]:
    return {"vin": vin, "dataset": dataset, "status": status, "message": message, "retryable": retryable,
            "attempts": attempts, "fetched_at": at}


def read_journal(path: Path) -> Journal:
    """Every complete batch of a journal; a batch cut short by a kill is dropped, never an error."""
    path = Path(path)
    batches: list[pa.RecordBatch] = []
    schema = SCHEMA
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
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    dataset = meta.get("dataset") or path.name.split("-", 1)[0]
    run_id = meta.get("run_id") or path.parent.parent.name
    return Journal(path, run_id, dataset, pa.Table.from_batches(batches, schema=SCHEMA))


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

