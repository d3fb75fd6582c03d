"""Benchmark (not a timed test): does a chunk's landing cost more as the store grows? (issue 27)

Run with `make bench` (or `pytest -m bench -s tests/bench/test_landing_growth_bench.py`).

100,000 specs answers as the sandbox writes them, staged as fetch tasks stage them (typed tables per chunk of 500),
landed into one store in order, as the flow's writer lands them: a transaction per chunk, then in groups of four
chunks (`land_together`, what the flow does with the chunks that came back while it landed). Prints the writer's
CPU per chunk (`time.process_time`: DuckDB's threads and any checkpoint included) in the first and the last fifth,
and the statements whose cost grew most between them. Asserts only that every answer landed.
"""

from __future__ import annotations

import collections
import time

import pytest

from fleet_data.tasks.land.landing import land_together
from fleet_data.tasks.land.shred import staged_tables
from fleet_data.tasks.staging.staged_chunk import StagedTables
from fleet_data.tasks.store.database import Database, open_database
from tests.bench.test_raw_first_bench import CHUNK, _answers, _journal

pytestmark = pytest.mark.bench
ANSWERS = 100_000


def _land_all(tmp_path, name: str, chunks: list[StagedTables], group: int) -> None:
    spent: dict[tuple[int, str], float] = collections.defaultdict(float)
    fifth = {"now": 0}
    run = Database._run

    def timed(self, statement, params=None):  # noqa: ANN001, ANN202
        started = time.process_time()
        run(self, statement, params)
        spent[(fifth["now"], " ".join(statement.split())[:60])] += time.process_time() - started

    per_group: list[float] = []
    with pytest.MonkeyPatch.context() as patch, open_database(tmp_path / f"{name}.duckdb") as db:
        patch.setattr(Database, "_run", timed)
        run_id = db.start_run("bench")
        groups = [chunks[i:i + group] for i in range(0, len(chunks), group)]
        for n, landing in enumerate(groups):
            fifth["now"] = n * 5 // len(groups)
            started = time.process_time()
            land_together(db, run_id, [("specs", staged) for staged in landing])
            per_group.append(time.process_time() - started)
        assert db.sql("SELECT count(*) FROM specs").item() == ANSWERS
    k = len(groups) // 5
    first, last = sum(per_group[:k]) / k / group, sum(per_group[-k:]) / k / group
    print(f"\n{name}: {len(groups)} landings of {group} chunk(s) of {CHUNK}; writer CPU per chunk: first fifth "
          f"{first * 1000:.0f} ms, last fifth {last * 1000:.0f} ms (x{last / first:.2f}); "
          f"{ANSWERS / (sum(per_group)):,.0f} answers per CPU second in all")
    statements = {s for _, s in spent}
    grew = sorted(((spent[(4, s)] - spent[(0, s)]) / k / group, s) for s in statements)[-5:]
    for ms, statement in reversed(grew):
        print(f"  +{ms * 1000:5.1f} ms per chunk from the first fifth to the last: {statement}")


@pytest.mark.timeout(1800)
def test_a_chunks_landing_as_the_store_grows(tmp_path):
    table = _journal(tmp_path, _answers(ANSWERS))
    chunks = [StagedTables("specs", staged_tables("specs", table.slice(o, CHUNK))) for o in range(0, ANSWERS, CHUNK)]
    _land_all(tmp_path, "a transaction per chunk", chunks, 1)
    _land_all(tmp_path, "four chunks a transaction", chunks, 4)
