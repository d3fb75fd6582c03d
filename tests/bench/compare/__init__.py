"""Side-by-side benchmark (issue 6): `fleet refresh` against what else would do the same calls.

Contenders, each a script run in its own process and measured the same way (tests/bench/measure.py):
    ours           `python -m fleet_data.flows.cli refresh` (Prefect tasks, parsing, staging, DuckDB landing)
    bare_aiohttp   the ceiling: the same calls at the same concurrency, bodies read and dropped
    dlt_pipeline   a dlt source (a VIN resource and one parallelized transformer per endpoint) into DuckDB
    plain_script   requests in a thread pool, pandas.json_normalize, a DuckDB insert
Every contender reads the same fleet file (fleets.py) and makes the same 3 calls per VIN.
tests/bench/test_compare_bench.py runs them all and writes bench-results/compare.json.
"""
