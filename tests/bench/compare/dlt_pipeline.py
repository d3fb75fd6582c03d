"""The same work as a dlt user would write it: a VIN resource, one parallelized transformer per endpoint.

dlt's own requests client (retries included, a session per thread, its pool sized to the concurrency),
dlt's extract thread pool set to the concurrency (EXTRACT__WORKERS, EXTRACT__MAX_PARALLEL_ITEMS), and
dlt's normalize and load into DuckDB (nested lists become child tables, as dlt does by default).
Loads Parquet files, as dlt's performance guide suggests: with dlt's default for DuckDB (insert_values)
the load step alone took 40 s and 2 GB for 3,000 rows here (duckdb 2.0); `--loader-file-format
insert_values` measures that default.
    python -m tests.bench.compare.dlt_pipeline --base-url URL --key K --fleet F --db DB --concurrency C
"""
from __future__ import annotations

import os
from pathlib import Path

from .cli import emit, parser
from .fleets import DATASETS, PATHS, params, read_fleet


def configure(concurrency: int, home: Path) -> None:
    """dlt reads these when the pipeline runs: its thread pool size, its working folder, no telemetry."""
    os.environ["EXTRACT__WORKERS"] = str(concurrency)
    os.environ["EXTRACT__MAX_PARALLEL_ITEMS"] = str(concurrency)
    os.environ["RUNTIME__DLTHUB_TELEMETRY"] = "false"
    os.environ["DLT_DATA_DIR"] = str(home)
    os.environ.setdefault("RUNTIME__LOG_LEVEL", "WARNING")


def vehicle_data(base_url: str, key: str, rows: list[dict[str, str]], concurrency: int):
    import dlt
    from dlt.sources.helpers.requests import Client

    client = Client(max_connections=concurrency, request_timeout=30)

    @dlt.resource(selected=False)
    def fleet():
        yield from rows

    def endpoint(dataset: str):
        @dlt.transformer(name=dataset, parallelized=True, write_disposition="replace")
        def fetch(row: dict[str, str]):
            return client.get(base_url + PATHS[dataset], params={**params(dataset, row), "key": key}).json()

        return fetch

    @dlt.source(name="vehicle_data")
    def source():
        return [fleet | endpoint(dataset) for dataset in DATASETS]

    return source()


def main(argv: list[str] | None = None) -> int:
    cli = parser(__doc__)
    cli.add_argument("--loader-file-format", default="parquet", choices=["parquet", "insert_values", "jsonl"])
    args = cli.parse_args(argv)
    home = Path(args.db).with_suffix(".dlt")
    configure(args.concurrency, home)
    import dlt

    rows = read_fleet(args.fleet)
    pipeline = dlt.pipeline(pipeline_name="vehicle_data", pipelines_dir=str(home / "pipelines"),
                            destination=dlt.destinations.duckdb(args.db), dataset_name="vehicle_data")
    pipeline.run(vehicle_data(args.base_url, args.key, rows, args.concurrency),
                 loader_file_format=args.loader_file_format)
    with pipeline.sql_client() as sql:
        landed = {d: sql.execute_sql(f"SELECT count(*) FROM {d}")[0][0] for d in DATASETS}
    calls = len(rows) * len(DATASETS)
    # raise_for_status is on: a non-200 answer would have failed the run, so every call landed a row
    ok = sum(landed.values())
    emit(f"dlt_pipeline ({args.loader_file_format})", calls=calls, ok=ok, rows=landed)
    return 0 if ok == calls else 1


if __name__ == "__main__":
    raise SystemExit(main())
