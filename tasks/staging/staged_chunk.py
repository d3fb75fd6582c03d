"""A chunk's typed tables, staged beside its journal: the hand-off from a fetch task to the single writer.

A fetch task journals its answers as they arrive (tasks/staging/journal.py); once the chunk is done it shreds the
journal's rows into every table they land in (tasks/land/shred.py `staged_tables`) and writes them here, as
`<journal stem>.tables.arrow` beside `<journal stem>.arrows`. The writer then reads these tables and only
upserts them: no JSON parsed, nothing hashed, no Python per answer. The file is written whole and renamed
into place, so it is there complete or not at all; a journal without it (a chunk killed before, a run that
staged none) is shredded by the lander, the same function on the same rows.

One Arrow IPC file holds every table: a row per table, its name and its rows as an Arrow IPC file of their
own. Read memory-mapped, the tables are views of the file, not copies. This module knows the format only;
it imports neither the fetch nor the landing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

FORMAT = "fleet-staged-tables/1"
SUFFIX = ".tables.arrow"
JOURNAL_SUFFIX = ".arrows"  # tasks/staging/journal.py SUFFIX (not imported: the journal's format is its own)
_BUNDLE = pa.schema([("table", pa.string()), ("rows", pa.int64()), ("ipc", pa.large_binary())])


@dataclass
class StagedTables:
    """A chunk's rows per table, in landing order, as the store's tables type them."""

    dataset: str
    tables: dict[str, pa.Table] = field(default_factory=dict)


def location(journal: str) -> str:
    """Where the typed tables of the journal at `journal` (a path or a URL) are staged."""
    stem = journal[: -len(JOURNAL_SUFFIX)] if journal.endswith(JOURNAL_SUFFIX) else journal
    return stem + SUFFIX


def write(path: Path, staged: StagedTables) -> Path:
    """Write `staged` to `path` whole: to a temporary name first, renamed when complete."""
    names, counts, blobs = [], [], []
    for name, table in staged.tables.items():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        names.append(name)
        counts.append(table.num_rows)
        blobs.append(sink.getvalue().to_pybytes())
    bundle = pa.Table.from_arrays([pa.array(names, pa.string()), pa.array(counts, pa.int64()),
                                   pa.array(blobs, pa.large_binary())],
                                  schema=_BUNDLE.with_metadata({"format": FORMAT, "dataset": staged.dataset}))
    partial = path.with_name(path.name + ".partial")
    try:
        with pa.OSFile(str(partial), "wb") as sink, pa.ipc.new_file(sink, bundle.schema) as writer:
            writer.write_table(bundle)
    except BaseException:
        partial.unlink(missing_ok=True)  # a full disk, say: a cut file only takes room
        raise
    os.replace(partial, path)
    return path


def read(path: Path) -> StagedTables:
    """The tables staged at `path`, memory-mapped (valid while the file is; the lander deletes it after landing)."""
    bundle = pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
    meta = {k.decode(): v.decode() for k, v in (bundle.schema.metadata or {}).items()}
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: not a staged chunk ({meta.get('format')!r})")
    blobs = [blob for chunk in bundle.column("ipc").chunks for blob in chunk]
    tables = {name: pa.ipc.open_file(blob.as_buffer()).read_all()
              for name, blob in zip(bundle.column("table").to_pylist(), blobs)}
    return StagedTables(meta["dataset"], tables)
