"""The Parquet lake, written incrementally: each run rewrites only the files whose rows changed.

Every exported table and view is cut into partitions (`sql/export/<name>.sql` or `vin_bucket(vin)` adds
the partition columns; storage.EXPORT_TABLES names them), each a folder
`<lake>/<name>/<col>=<value>/.../` of files `part-<n>.parquet` (hive layout, the partition columns in the path
only). A partition's fingerprint (its row count, the sum of its rows' hashes, the schema) is kept in its files'
Parquet metadata, each file's for its own rows: the partition's is their sum. An export computes every
partition's fingerprint in DuckDB, one scan per table, and writes only the partitions whose fingerprint differs.
Such a partition is written again whole, as one file, `part-0.parquet`, unless its only change is new rows of
the VINs the run answered (`appended`): those rows then go into a file of their own beside the others, which stay
(at most `MOST_FILES` files; past that the partition is written whole again). Files of partitions that no longer
exist are deleted. A file is written beside its place and renamed onto it (atomic), so a reader sees each file
whole, old or new. Rows replaced in DuckDB land in the same partition again (the VIN, month or run of their key),
except a raw answer received again, which moves to the new run's partition: partitions are written whole before
files are added anywhere, and a partition's added files are deleted before it is written whole, so no row is
ever in the lake twice (a reader may miss one while the export runs).
"""

from __future__ import annotations

import hashlib
import os
import re
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

PART_FILE = re.compile(r"part-(\d+)\.parquet")
MOST_FILES = 8  # files a partition may hold before an append writes it whole again, as one
APPENDED = "lake_appended_vins"  # the VINs whose new rows may be appended, while an export runs
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


@dataclass(frozen=True)
class Fingerprint:
    """Rows of a partition or file: their schema, count and sum of hashes. Sums add up: a partition's is its
    files' sum, and new rows' added to what a partition holds is what it should hold when they are all it lacks."""

    schema: str
    rows: int
    hashed: int

    def __add__(self, other: Fingerprint) -> Fingerprint:
        if other.schema != self.schema:
            raise ValueError("fingerprints of different schemas")
        return Fingerprint(self.schema, self.rows + other.rows, self.hashed + other.hashed)

    def __str__(self) -> str:
        return f"{self.schema}:{self.rows}:{self.hashed}"

    @classmethod
    def parse(cls, text: str) -> Fingerprint | None:
        try:
            schema, rows, hashed = text.split(":")
            return cls(schema, int(rows), int(hashed))
        except ValueError:
            return None


@dataclass
class LakeExport:
    """What an export did: every exported folder, and the files written, removed and kept as they were."""

    tables: dict[str, Path] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    kept: int = 0


Wanted = dict[str, tuple[Fingerprint, tuple[Any, ...]]]  # partition folder (relative) -> (fingerprint, its values)


def export(con: Any, lock: threading.RLock, lake: Path, relations: list[Relation],
           appended: pl.DataFrame | None = None) -> LakeExport:
    """Bring `lake` up to date with `relations`, writing only the partitions that changed. `appended`: the VINs
    (column `vin`) whose rows, where they are all a partition lacks, are added to it as a file of their own."""
    lake.mkdir(parents=True, exist_ok=True)
    report = LakeExport()
    if appended is not None:
        with lock:
            con.register(APPENDED, appended.select("vin").unique())
    try:
        for relation in relations:
            folder = lake / relation.name
            shutil.rmtree(lake / f".{relation.name}.writing", ignore_errors=True)  # the previous exporter's staging
            # A view is computed where it is read, not kept in a temporary table first: most exports find most
            # views unchanged, and their fingerprints cost half of computing and storing them.
            with lock:
                wanted, new_rows = _fingerprints(con, relation, appended is not None)
            _update(con, lock, relation, folder, wanted, new_rows, report)
            report.tables[relation.name] = folder
    finally:
        if appended is not None:
            with lock:
                con.unregister(APPENDED)
    return report


def _update(con: Any, lock: threading.RLock, relation: Relation, folder: Path, wanted: Wanted,
            new_rows: Wanted | None, report: LakeExport) -> None:
    """Delete the files of partitions that are gone, then write those whose fingerprint changed: whole, or only
    their rows of the appended VINs (`new_rows`) where those are all they lack."""
    present, strays = _present(folder)
    stale = strays + [path for rel, files in present.items() if rel not in wanted for path in files.values()]
    for path in stale:
        path.unlink()
    report.removed += [p for p in stale if p.suffix == ".parquet"]
    have = {rel: _fingerprint_of(files) for rel, files in present.items() if rel in wanted}
    changed = {rel for rel, (fingerprint, _) in wanted.items() if have.get(rel) != fingerprint}
    appends = _appends(wanted, have, present, changed, new_rows or {})
    # Partitions that had a file first: a row moving between partitions leaves before it arrives.
    whole = sorted(changed - set(appends), key=lambda rel: rel not in present)
    report.kept += sum(len(files) for rel, files in present.items() if rel in wanted and rel not in whole)
    for rel in whole:  # written whole, as one file: the files added to it go first, so no row is there twice
        added = [path for index, path in present.get(rel, {}).items() if index]
        for path in added:
            path.unlink()
        report.removed += added
    with lock:
        if whole:
            report.written += _write(con, relation, folder, {_file(rel, 0): wanted[rel] for rel in whole},
                                     replaced=sum(rel in present for rel in whole))
        if appends:  # after every partition written whole: a moved row has left its old one
            report.written += _write(con, relation, folder,
                                     {_file(rel, max(present[rel]) + 1): appends[rel] for rel in sorted(appends)},
                                     where=f"x.vin IN (SELECT vin FROM {APPENDED})")
    _remove_empty_folders(folder)


def _appends(wanted: Wanted, have: dict[str, Fingerprint | None], present: dict[str, dict[int, Path]],
             changed: set[str], new_rows: Wanted) -> Wanted:
    """The changed partitions that lack exactly their rows of the appended VINs, with those rows' fingerprints:
    checked by the sums, what a partition holds plus those rows is what it should hold."""
    found = {}
    for rel in changed:
        held, new = have.get(rel), new_rows.get(rel)
        if held is None or new is None or len(present[rel]) >= MOST_FILES or held.schema != new[0].schema:
            continue
        if held + new[0] == wanted[rel][0]:
            found[rel] = new
    return found


def _fingerprints(con: Any, relation: Relation, appended: bool = False) -> tuple[Wanted, Wanted | None]:
    """Each partition's folder (relative to the table's) -> (fingerprint, partition values); with `appended`, for a
    relation with a `vin`, the same of its rows of the appended VINs (None otherwise), in the same scan."""
    rel = con.sql(relation.select)
    schema = hashlib.sha256(repr((LAYOUT_VERSION, rel.columns, [str(t) for t in rel.types])).encode()).hexdigest()[:16]
    appended = appended and "vin" in rel.columns
    columns = ", ".join(f"x.{_quoted(c)}" for c in relation.partitions)
    new = " FILTER (WHERE a.vin IS NOT NULL)"
    rows = con.execute(
        f"SELECT {columns + ', ' if columns else ''}count(*), CAST(sum(hash(x)) AS VARCHAR)"
        + (f", count(*){new}, CAST(sum(hash(x)){new} AS VARCHAR)" if appended else "")
        + f" FROM ({relation.select}) AS x"
        + (f" LEFT JOIN {APPENDED} AS a ON a.vin = x.vin" if appended else "")
        + (f" GROUP BY {columns}" if columns else "")
    ).fetchall()
    found: Wanted = {}
    new_rows: Wanted = {}
    width = len(relation.partitions)
    for row in rows:
        values, path = tuple(row[:width]), _path_of(relation.partitions, tuple(row[:width]))
        if row[width]:
            found[path] = (Fingerprint(schema, row[width], int(row[width + 1] or 0)), values)
        if appended and row[width + 2]:
            new_rows[path] = (Fingerprint(schema, row[width + 2], int(row[width + 3] or 0)), values)
    if not found:  # an empty table still reads: one empty file, no partition folders
        found[""] = (Fingerprint(schema, 0, 0), ())
    return found, new_rows if appended else None


def _path_of(columns: tuple[str, ...], values: tuple[Any, ...]) -> str:
    """A partition's folder, relative to its table's ("" for a table in one partition)."""
    return "/".join(f"{c}={NULL_PARTITION if v is None else quote(str(v), safe='')}" for c, v in zip(columns, values))


def _file(partition: str, index: int) -> str:
    return f"{partition}/part-{index}.parquet" if partition else f"part-{index}.parquet"


def _present(folder: Path) -> tuple[dict[str, dict[int, Path]], list[Path]]:
    """The files under a table folder: each partition's (relative folder -> file number -> path), and any other
    file (the leftover of a cut write, a file of an older layout)."""
    partitions: dict[str, dict[int, Path]] = {}
    strays = []
    if folder.is_dir():
        for path in folder.rglob("*"):
            if not path.is_file():
                continue
            if (match := PART_FILE.fullmatch(path.name)) is None:
                strays.append(path)
                continue
            rel = path.parent.relative_to(folder).as_posix()
            partitions.setdefault("" if rel == "." else rel, {})[int(match.group(1))] = path
    return partitions, strays


def _fingerprint_of(files: dict[int, Path]) -> Fingerprint | None:
    """A partition's fingerprint: the sum of its files' (None: one unreadable, or of another schema)."""
    total = None
    for path in files.values():
        one = _file_fingerprint(path)
        if one is None or total is not None and one.schema != total.schema:
            return None
        total = one if total is None else total + one
    return total


def _file_fingerprint(path: Path) -> Fingerprint | None:
    try:
        metadata = pq.read_metadata(path).metadata or {}
    except (OSError, pa.ArrowInvalid):
        return None  # unreadable: written again
    value = metadata.get(FINGERPRINT_KEY)
    return Fingerprint.parse(value.decode()) if value else None


def _write(con: Any, relation: Relation, folder: Path, changed: dict[str, tuple[Fingerprint, tuple[Any, ...]]],
           replaced: int = 0, where: str = "") -> list[Path]:
    """Write a file for each changed partition (file path relative to `folder` -> its fingerprint and partition
    values; the first `replaced` ones, which had a file, before the others), of its rows or those `where` holds:
    read in one pass, sorted by partition and streamed, so memory holds a few partitions, not the table."""
    targets = [(folder / rel, str(fingerprint).encode()) for rel, (fingerprint, _) in changed.items()]
    keyed = [values for _, values in changed.values() if values]
    with ThreadPoolExecutor(WRITERS) as pool:
        writes = _Writes(pool, targets, replaced)
        if not keyed:  # the whole relation in one file: unpartitioned, or empty (then with every column, path ones too)
            select = f"SELECT * FROM ({relation.select}) AS x WHERE {where}" if where else relation.select
            writes.put(0, con.sql(select).to_arrow_table())
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
                                 f"{'WHERE ' + where if where else ''} ORDER BY k.{PART}").to_arrow_reader(BATCH_ROWS)
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
