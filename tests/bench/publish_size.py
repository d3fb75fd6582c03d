"""What a publish costs at a store of 1 GB and 10 GB, and whether it follows the change or the file (docs/scale.md,
"Publishing at 1 GB and 10 GB"; issue 27).

    python -m tests.bench.publish_size 1 10

For each size (GB), a working store with our schema (`open_database`, every migration) filled in bulk with DuckDB
SQL through the Database's own connection: `specs` and `fetch_status` rows for some VINs, then `raw_responses` in
batches of two row groups (245,760) until the file reaches the size. The raw bodies are JSON holding base64 of MD5 bytes, drawn from
65,536 bodies of 4 KiB: the `body` column's zstd keeps about 70% of them, as it would of an answer it cannot shrink.
Generating is not measured. Then, with `publish` (tasks/store/published.py) on the store held open, as a run does:

- the first publish (a whole copy: no earlier snapshot to bring up to date);
- a publish with nothing changed (a whole copy again: it keeps the first file as `<db>.previous`);
- a publish with nothing changed that brings the kept snapshot up to date in place;
- a publish after a small run's worth of change: 1,000 VINs spread over the table upserted into `specs` and
  `fetch_status` (MERGE, as the landing does) and 1,000 `raw_responses` added, in place. Its CHECKPOINT is timed on
  its own before it (the publish's own then finds nothing to write): the two add up to what a run's publish costs;
- the next publish with nothing changed (the other file of the two catches up with the change);
- the same change again, published by a whole copy (the kept snapshot removed first): the old way, side by side.

For each publish: wall seconds, CPU seconds of this process (getrusage: user + system, DuckDB's threads included),
the file's bytes and MB/s, and what a publish in place wrote; and the share of the new published file's blocks that differ from the one it replaced
(the old one kept by a hard link, both read and hashed per block: DuckDB's 12 KiB of headers, then its 256 KiB
blocks), which says whether a block-level diff would make publishing follow the change. Then the same file copied
with `shutil.copyfile` and fsynced, for the disk's own rate. Each size's files are deleted before the next.
The machine's load average is printed before and after each size: the figures are mostly I/O, and other work shares
the disk and the page cache.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

import fleet_data.tasks.store.published as publishing
from fleet_data.tasks.store.database import Database, open_database
from fleet_data.tasks.store.files import _fsync, previous_path, publishing_path, working_path
from fleet_data.tasks.store.published import publish, published_record_path

GB = 10**9
HEADERS = 3 * 4096  # DuckDB's file header and its two database headers, before the first block
BLOCK = 256 * 1024  # DuckDB's block
ROW_GROUP = 122_880  # DuckDB's rows per row group
BATCH = 2 * ROW_GROUP  # raw_responses per INSERT: two whole row groups (about 0.7 GB of file)
BODIES = 65_536  # distinct 4 KiB bodies: a zstd frame rarely meets the same one twice
ROWS_PER_GB = 340_000  # raw_responses per GB of file (measured)
CHANGED = 1_000


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(work: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds of `work()`."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    work()
    return time.perf_counter() - wall, cpu_seconds() - cpu


def fill(store: Database, size: int) -> tuple[int, int]:
    """Fill the store to about `size` bytes; returns (VINs, raw responses)."""
    run, path = store._run, Path(store.path)  # _run: each statement's result finished before the next
    vins = max(size * ROWS_PER_GB // GB // 2, CHANGED)
    run("SET enable_progress_bar = false")
    run(f"""CREATE TEMP TABLE bodies AS SELECT k, to_base64(unhex(string_agg(md5((k * 192 + j)::VARCHAR), '')))
                    AS payload FROM range({BODIES}) a(k), range(192) b(j) GROUP BY k""")
    run(f"""INSERT INTO specs (vin, year, make, model, trim, style, type, made_in, doors, fuel_type, engine,
                      engine_cylinders, transmission, drivetrain, colors, equipment, warranties, is_international,
                      run_id, fetched_at, service, run_seq)
                    SELECT 'V' || lpad(i::VARCHAR, 16, '0'), 2000 + i % 25, 'Make' || i % 40,
                      'Model' || i % 700, 'Trim' || i % 9, 'Style' || i % 30, 'Truck', 'USA', 2 + i % 3, 'Diesel',
                      'V8 ' || i % 97, 8, 'Automatic', 'AWD', [{{'category': 'exterior', 'name': 'Color' || i % 50}}],
                      [{{'name': 'Tow package', 'value': (i % 2 = 0)::VARCHAR}}],
                      [{{'type': 'basic', 'miles': 36000, 'months': 36}}], false, 'run-0',
                      TIMESTAMPTZ '2026-01-01' + INTERVAL (i % 86400) SECOND, 'vds', 1
                    FROM range({vins}) t(i)""")
    run(f"""INSERT INTO fetch_status (vin, dataset, outcome, run_id, fetched_at, service, run_seq)
                    SELECT 'V' || lpad(i::VARCHAR, 16, '0'), d, 'found', 'run-0',
                      TIMESTAMPTZ '2026-01-01' + INTERVAL (i % 86400) SECOND, 'vds', 1
                    FROM range({vins}) t(i), (VALUES ('specs'), ('market_value')) s(d)""")
    run("CHECKPOINT")
    raws, start = 0, path.stat().st_size
    while path.stat().st_size < size:
        per_row = (path.stat().st_size - start) / raws if raws else GB / ROWS_PER_GB  # bytes per raw response
        count = min(BATCH, max(int((size - path.stat().st_size) / per_row), 1_000))  # whole row groups but the last
        insert_raw(store, raws, count, vins, "run-0", 1)
        raws += count
        run("CHECKPOINT")  # each batch written: memory stays bounded and the file's size is what is held
    return vins, raws


def insert_raw(store: Database, start: int, count: int, vins: int, run_id: str, run_seq: int) -> None:
    store._run(f"""
        INSERT INTO raw_responses (response_hash, dataset, vin, batch_id, endpoint, request_params, status, body,
                                   run_id, fetched_at, service, run_seq)
        SELECT sha256(i::VARCHAR), 'specs', 'V' || lpad((i % {vins})::VARCHAR, 16, '0'), NULL, '/specs',
               '{{"vin": "' || 'V' || lpad((i % {vins})::VARCHAR, 16, '0') || '"}}', 200,
               '{{"vin": "V' || lpad((i % {vins})::VARCHAR, 16, '0') || '", "payload": "' || payload || '"}}',
               '{run_id}', TIMESTAMPTZ '2026-01-01' + INTERVAL (i % 86400) SECOND, 'vds', {run_seq}
        FROM range({start}, {start + count}) t(i) JOIN bodies ON k = hash(i) % {BODIES}""")


def small_change(store: Database, vins: int, raws: int) -> None:
    """A small run's landing: 1,000 VINs spread over the table answered again, 1,000 raw answers added."""
    run, step = store._run, vins // CHANGED
    run("BEGIN TRANSACTION")
    run(f"""CREATE OR REPLACE TEMP TABLE answered AS
                    SELECT 'V' || lpad((k * {step})::VARCHAR, 16, '0') AS vin FROM range({CHANGED}) t(k)""")
    run("""MERGE INTO specs AS t USING (SELECT vin FROM answered) AS s ON t.vin = s.vin
                   WHEN MATCHED THEN UPDATE SET year = t.year + 1, run_id = 'run-1',
                        fetched_at = TIMESTAMPTZ '2026-02-01', run_seq = 2""")
    run("""MERGE INTO fetch_status AS t USING (SELECT vin, 'specs' AS dataset FROM answered) AS s
                   ON t.vin = s.vin AND t.dataset = s.dataset
                   WHEN MATCHED THEN UPDATE SET run_id = 'run-1', fetched_at = TIMESTAMPTZ '2026-02-01', run_seq = 2""")
    insert_raw(store, raws, CHANGED, vins, "run-1", 2)
    run("COMMIT")


written: list[int] = []  # what the publish that brought a kept snapshot up to date wrote
_update_open_copy = publishing.update_open_copy


def _counted(source: int, target: Path, block_size: int) -> int:
    written.append(_update_open_copy(source, target, block_size))
    return written[-1]


def free_blocks(store: Database) -> str:
    """The working store's blocks in use and free (a checkpoint writes anew, then frees what it replaced)."""
    used, free = store.connection.execute("SELECT used_blocks, free_blocks FROM pragma_database_size()").fetchone() or (0, 0)
    return f"blocks in use {used:,}, free {free:,}"


def blocks_differing(old: Path, new: Path) -> tuple[int, int]:
    """(blocks of `new` that differ from `old`, blocks of `new`): the headers as one piece, then DuckDB's blocks."""
    differing = total = 0
    with old.open("rb", buffering=0) as a, new.open("rb", buffering=0) as b:
        for length in itertools.chain([HEADERS], itertools.repeat(BLOCK)):
            theirs, ours = a.read(length), b.read(length)
            if not ours:
                break
            total += 1
            if hashlib.sha1(theirs, usedforsecurity=False).digest() != hashlib.sha1(ours, usedforsecurity=False).digest():
                differing += 1
    return differing, total


def report(name: str, wall: float, cpu: float, size: int) -> None:
    print(f"    {name}: {wall:.2f} s wall, {cpu:.2f} s CPU, {size / GB:.2f} GB, {size / 1e6 / wall:,.0f} MB/s", flush=True)


def measure(gb: float, folder: Path) -> None:
    db = folder / f"store-{gb:g}gb.duckdb"
    previous = folder / "previous.duckdb"
    copy = folder / "copy.duckdb"
    said: list[str] = []
    print(f"{gb:g} GB: load average {load()}", flush=True)

    def published(name: str, kept: bool) -> None:
        """Publish; say what it cost and, when it brought the kept snapshot up to date, what it wrote."""
        written.clear()
        wall, cpu = timed(lambda: publish(store, db, said.append))
        report(name, wall, cpu, db.stat().st_size)
        assert bool(written) == kept, (name, written)  # in place exactly when meant to be
        if written:
            print(f"      in place: wrote {written[0] / 2**20:,.1f} MiB of {db.stat().st_size / 2**20:,.0f}", flush=True)

    try:
        store = open_database(db)
        try:
            started = time.perf_counter()
            vins, raws = fill(store, int(gb * GB))
            print(f"    generated {Path(store.path).stat().st_size / GB:.2f} GB ({vins:,} VINs, {raws:,} raw responses) "
                  f"in {time.perf_counter() - started:.0f} s; {free_blocks(store)}; the last row group of raw_responses holds "
                  f"{raws % ROW_GROUP:,} rows", flush=True)
            published("first publish (a copy: nothing kept yet)", kept=False)
            os.link(db, previous)  # the published file it replaces lives on under this name
            published("publish, nothing changed (a copy: it keeps the first for the next)", kept=False)
            differing, total = blocks_differing(previous, db)
            print(f"    blocks differing from the previous published file: {differing:,} of {total:,}", flush=True)
            previous.unlink()
            published("publish, nothing changed, the kept snapshot brought up to date", kept=True)

            small_change(store, vins, raws)
            os.link(db, previous)
            checkpoint_wall, checkpoint_cpu = timed(lambda: store._run("CHECKPOINT"))
            print(f"    after {CHANGED:,} VINs upserted and {CHANGED:,} raw responses added: CHECKPOINT "
                  f"{checkpoint_wall:.2f} s wall, {checkpoint_cpu:.2f} s CPU; then", flush=True)
            published("publish in place", kept=True)
            differing, total = blocks_differing(previous, db)
            print(f"    blocks differing from the previous published file: {differing:,} of {total:,} "
                  f"({differing / total:.1%}; {(db.stat().st_size - previous.stat().st_size) / 2**20:+.1f} MiB)", flush=True)
            previous.unlink()
            published("the next publish, nothing changed (the other file catches up)", kept=True)

            small_change(store, vins, raws + CHANGED)  # the same change again, published the old way: a whole copy
            checkpoint_wall, checkpoint_cpu = timed(lambda: store._run("CHECKPOINT"))
            print(f"    the same change again: CHECKPOINT {checkpoint_wall:.2f} s wall, {checkpoint_cpu:.2f} s CPU; "
                  "then, with no snapshot kept", flush=True)
            previous_path(db).unlink()
            published("publish by a whole copy", kept=False)
            print(f"    {free_blocks(store)}", flush=True)
        finally:
            store.close()

        def raw_copy() -> None:
            shutil.copyfile(db, copy)
            _fsync(copy)

        wall, cpu = timed(raw_copy)
        report("shutil.copyfile + fsync of the published file", wall, cpu, copy.stat().st_size)
        for line in said:
            print(f"    publish said: {line}", flush=True)
    finally:
        for path in (db, previous, copy, working_path(db), Path(f"{working_path(db)}.wal"), publishing_path(db),
                     published_record_path(db), previous_path(db)):
            path.unlink(missing_ok=True)
    print(f"    load average after: {load()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", type=float, nargs="*", default=[1.0, 10.0], help="store sizes in GB")
    args = parser.parse_args()
    publishing.update_open_copy = _counted  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as scratch:
        for gb in args.sizes:
            free = shutil.disk_usage(scratch).free
            if free < 3.3 * gb * GB:
                raise SystemExit(f"{gb:g} GB needs about {3.3 * gb:.0f} GB free in {scratch} (three copies at once); "
                                 f"{free / GB:.0f} GB free")
            measure(gb, Path(scratch))


if __name__ == "__main__":
    main()
