"""What many users would write first: requests, pandas, DuckDB.

Given threads (a session per thread, as many threads as the concurrency): a strictly sequential
loop would take hours at 150 ms for 30,000 calls, and nobody would leave it that way.
Nested lists (colors, warranties, title events) become JSON text, since DuckDB cannot infer
a type for a pandas column of Python lists that are sometimes empty.
    python -m tests.bench.compare.plain_script --base-url URL --key K --fleet F --db DB --concurrency C
"""
from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import duckdb
import pandas as pd
import requests

from .cli import emit, parser
from .fleets import DATASETS, read_fleet, urls

_local = threading.local()


def fetch(url: str) -> dict | None:
    session = getattr(_local, "session", None)
    if session is None:
        session = _local.session = requests.Session()
    response = session.get(url, timeout=30)
    return response.json() if response.status_code == 200 else None


def to_frame(answers: list[dict]) -> pd.DataFrame:
    frame = pd.json_normalize(answers)
    for column in frame.columns:
        if frame[column].map(lambda value: isinstance(value, list)).any():
            frame[column] = frame[column].map(json.dumps)
    return frame


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__).parse_args(argv)
    targets = urls(args.base_url, args.key, read_fleet(args.fleet))
    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        answers = list(pool.map(fetch, [url for _, url in targets]))
    by_dataset: dict[str, list[dict]] = {d: [] for d in DATASETS}
    for (dataset, _), answer in zip(targets, answers):
        if answer is not None:
            by_dataset[dataset].append(answer)
    rows = {}
    with duckdb.connect(args.db) as db:
        for dataset, found in by_dataset.items():
            frame = to_frame(found)
            db.register("frame", frame)
            db.execute(f"CREATE OR REPLACE TABLE {dataset} AS SELECT * FROM frame").fetchall()
            db.unregister("frame")
            rows[dataset] = db.execute(f"SELECT count(*) FROM {dataset}").fetchall()[0][0]
    ok = sum(len(found) for found in by_dataset.values())
    emit("plain_script", calls=len(targets), ok=ok, rows=rows)
    return 0 if ok == len(targets) else 1


if __name__ == "__main__":
    raise SystemExit(main())
