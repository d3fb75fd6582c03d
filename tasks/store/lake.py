"""The Parquet lake, written incrementally: each run rewrites only the files whose rows changed.

Every exported table and view is cut into partitions (`sql/export/<name>.sql` or `vin_bucket(vin)` adds
the partition columns; storage.EXPORT_TABLES names them) and each partition is one file,
`<lake>/<name>/<col>=<value>/.../part-0.parquet` (hive layout, the partition columns in the path only).
A partition's fingerprint (its row count, the sum of its rows' hashes, the schema) is kept in the
file's Parquet metadata; an export computes every partition's fingerprint in DuckDB, one scan per
table, and writes only the partitions whose fingerprint differs from their file's. Files of partitions
that no longer exist are deleted. A file is written beside its place and renamed onto it (atomic), so
a reader sees each file whole, old or new. Rows replaced in DuckDB land in the same partition again
(the VIN, month or run of their key), except a raw answer received again, which moves to the new run's
partition: old partitions are rewritten before new ones are written, so it is never in the lake twice
once the export is over.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

FILE_NAME = "part-0.parquet"
FINGERPRINT_KEY = b"fleet_data.fingerprint"
LAYOUT_VERSION = "1"  # bump to rewrite every lake file once (a change of layout or of what a fingerprint covers)
# Files written side by side: pyarrow encodes without the GIL (16 files of a 100,000-row table: 1.5-2x faster on 2 cores).
WRITERS = min(4, os.cpu_count() or 1)
PART = "lake_part"  # the number of a changed partition, while its rows are read
BATCH_ROWS = 65_536  # rows per Arrow batch as they are read
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # what hive readers (DuckDB, pyarrow, polars) read as NULL


@dataclass(frozen=True)
class Relation:
    """One exported table or view: the SELECT that exports it and the partition columns it adds or has."""

    name: str
    select: str
    partitions: tuple[str, ...]


@dataclass
class LakeExport:
    """What an export did: every exported folder, and the files written, removed and kept as they were."""

    tables: dict[str, Path] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    kept: int = 0


def export(con: Any, lock: threading.RLock, lake: Path, relations: list[Relation]) -> LakeExport:
    """Bring `lake` up to date with `relations`, writing only the partitions that changed."""
    lake.mkdir(parents=True, exist_ok=True)
    report = LakeExport()
    for relation in relations:
        folder = lake / relation.name
        shutil.rmtree(lake / f".{relation.name}.writing", ignore_errors=True)  # the previous exporter's staging
        # A view is computed where it is read, not kept in a temporary table first: most exports find most
        # views unchanged, and their fingerprints cost half of computing and storing them.
        with lock:
            wanted = _fingerprints(con, relation)
        _update(con, lock, relation, folder, wanted, report)
        report.tables[relation.name] = folder
    return report


def _update(con: Any, lock: threading.RLock, relation: Relation, folder: Path,
            wanted: dict[str, tuple[str, tuple[Any, ...]]], report: LakeExport) -> None:
    """Delete the files of partitions that are gone, then write those whose fingerprint changed."""
    present = _present(folder)
    stale = [path for rel, path in present.items() if rel not in wanted]
    for path in stale:
        path.unlink()
    report.removed += [p for p in stale if p.suffix == ".parquet"]
    changed = {rel: fp for rel, (fp, _) in wanted.items() if _fingerprint_of(present.get(rel)) != fp}
    report.kept += len(wanted) - len(changed)
    if changed:
        # Partitions that had a file first: a row moving between partitions leaves before it arrives.
        order = sorted(changed, key=lambda rel: rel not in present)
        with lock:
            report.written += _write(con, relation, folder, {rel: (changed[rel], wanted[rel][1]) for rel in order},
                                     replaced=sum(rel in present for rel in order))
    _remove_empty_folders(folder)


def _fingerprints(con: Any, relation: Relation) -> dict[str, tuple[str, tuple[Any, ...]]]:
    """Each partition's file path (relative to the table folder) -> (fingerprint, partition values)."""
    rel = con.sql(relation.select)
    schema = hashlib.sha256(repr((LAYOUT_VERSION, rel.columns, [str(t) for t in rel.types])).encode()).hexdigest()[:16]
    columns = ", ".join(_quoted(c) for c in relation.partitions)
    group = f"{columns}, " if columns else ""
    rows = con.execute(
        f"SELECT {group}count(*), CAST(sum(hash(x)) AS VARCHAR) FROM ({relation.select}) AS x"
        + (f" GROUP BY {columns}" if columns else "")
    ).fetchall()
    found = {}
    for row in rows:
        values, count, hashed = tuple(row[: len(relation.partitions)]), row[-2], row[-1]
        found[_path_of(relation.partitions, values)] = (f"{schema}:{count}:{hashed or 0}", values)
    if not found:  # an empty table still reads: one empty file, no partition folders
        found[FILE_NAME] = (f"{schema}:0:0", ())
    return found


def _path_of(columns: tuple[str, ...], values: tuple[Any, ...]) -> str:
    segments = [f"{c}={NULL_PARTITION if v is None else quote(str(v), safe='')}" for c, v in zip(columns, values)]
    return "/".join([*segments, FILE_NAME])


def _present(folder: Path) -> dict[str, Path]:
    """Every file under a table folder, by path relative to it (leftovers of a cut write included)."""
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): p for p in folder.rglob("*") if p.is_file()}


def _fingerprint_of(path: Path | None) -> str | None:
    if path is None or path.suffix != ".parquet":
        return None
    try:
        metadata = pq.read_metadata(path).metadata or {}
    except (OSError, pa.ArrowInvalid):
        return None  # unreadable: written again
    value = metadata.get(FINGERPRINT_KEY)
    return value.decode() if value else None


def _write(con: Any, relation: Relation, folder: Path, changed: dict[str, tuple[str, tuple[Any, ...]]],
           replaced: int = 0) -> list[Path]:
    """Write the changed partitions, one file each (the first `replaced` ones, which had a file, before the others):
    their rows read in one pass, sorted by partition and streamed, so memory holds a few partitions, not the table."""
    targets = [(folder / rel, fingerprint.encode()) for rel, (fingerprint, _) in changed.items()]
    keyed = [values for _, values in changed.values() if values]
    with ThreadPoolExecutor(WRITERS) as pool:
        writes = _Writes(pool, targets, replaced)
        if not keyed:  # the whole relation in one file: unpartitioned, or empty (then with every column, path ones too)
            writes.put(0, con.sql(relation.select).to_arrow_table())
        else:
            # Each changed partition's number (`lake_part`) joined to its rows. A polars frame: pyarrow would
            # import pandas (0.3 s) to turn these Python values into Arrow.
            columns = relation.partitions
            keys = pl.DataFrame({**{c: [values[i] for values in keyed] for i, c in enumerate(columns)},
                                 PART: pl.Series(range(len(keyed)), dtype=pl.Int32)})
            match = " AND ".join(f"x.{_quoted(c)} IS NOT DISTINCT FROM k.{_quoted(c)}" for c in columns)
            con.register("lake_changed_keys", keys)
            reader = None
            try:
                reader = con.sql(f"SELECT x.* EXCLUDE ({', '.join(_quoted(c) for c in columns)}), k.{PART} "
                                 f"FROM ({relation.select}) AS x JOIN lake_changed_keys AS k ON {match} "
                                 f"ORDER BY k.{PART}").to_arrow_reader(BATCH_ROWS)
                empty = pa.Table.from_batches([], reader.schema.remove(reader.schema.get_field_index(PART)))
                for part, rows in _by_partition(reader):
                    writes.fill(part, empty)  # partitions whose rows went since their fingerprints: empty files
                    writes.put(part, rows)
                writes.fill(len(keyed), empty)
            finally:
                if reader is not None:
                    reader.close()  # a stream cut short (a write that failed) holds the connection until closed
                con.unregister("lake_changed_keys")
        writes.wait()
    return [target for target, _ in targets]


def _by_partition(reader: pa.RecordBatchReader) -> Iterator[tuple[int, pa.Table]]:
    """(partition number, its rows without `lake_part`) from a stream sorted by `lake_part`, each whole, in order."""
    pending: list[pa.RecordBatch] = []
    current = -1
    for batch in reader:
        if not batch.num_rows:
            continue
        parts = pl.Series(batch.column(PART)).to_numpy()  # not pyarrow's to_numpy: it imports pandas
        bounds = [0, *(np.flatnonzero(np.diff(parts)) + 1), len(parts)]
        for start, end in zip(bounds, bounds[1:]):
            if parts[start] != current and pending:
                yield current, pa.Table.from_batches(pending).drop_columns([PART])
                pending = []
            current = int(parts[start])
            pending.append(batch.slice(start, end - start))
    if pending:
        yield current, pa.Table.from_batches(pending).drop_columns([PART])


class _Writes:
    """Partition files written by `pool` in partition order's phases: every file that replaces one is on disk before
    the first new one is written. At most a few wait in memory at a time."""

    def __init__(self, pool: ThreadPoolExecutor, targets: list[tuple[Path, bytes]], replaced: int):
        self.pool, self.targets, self.replaced = pool, targets, replaced
        self.next = 0  # the next partition number to write
        self.waiting: deque[Future[None]] = deque()

    def put(self, part: int, rows: pa.Table) -> None:
        if part == self.replaced:
            self.wait()  # a row moving between partitions leaves before it arrives
        while len(self.waiting) >= 2 * WRITERS:
            self.waiting.popleft().result()
        target, fingerprint = self.targets[part]
        metadata = {**(rows.schema.metadata or {}), FINGERPRINT_KEY: fingerprint}
        self.waiting.append(self.pool.submit(_write_file, target, rows.replace_schema_metadata(metadata)))
        self.next = part + 1

    def fill(self, upto: int, empty: pa.Table) -> None:
        """An empty file for each partition number from the next one to `upto` (excluded)."""
        for part in range(self.next, upto):
            self.put(part, empty)

    def wait(self) -> None:
        while self.waiting:
            self.waiting.popleft().result()


def _write_file(target: Path, rows: pa.Table) -> None:
    """One partition's file, written beside its place and renamed onto it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".tmp")
    pq.write_table(rows, partial)
    partial.replace(target)


def _quoted(identifier: str) -> str:
    """A column name in SQL text (names come from storage.EXPORT_TABLES, never from input)."""
    return '"' + identifier.replace('"', '""') + '"'


def _remove_empty_folders(folder: Path) -> None:
    if not folder.is_dir():
        return
    for path in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(path.iterdir()):
            path.rmdir()
