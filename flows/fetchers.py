"""Where a refresh's fetch tasks run, and the lander that takes their staged files.

- default: the flow's own threads (Prefect's thread runner), as always;
- `--workers N`: N processes of this machine (Prefect's `ProcessPoolTaskRunner`);
- `--dask ADDRESS`: an existing Dask cluster (prefect-dask's `DaskTaskRunner`).

Only fetch tasks go there; ingest, plan, recall batches, landing and finishing stay in the flow's
process, which is the one writer of the database. A fetch task takes a slice of the due list and
returns where it staged the answers (`--staging`, else the run's local staging folder); the flow
lands each file as it arrives (tasks/steps/refresh_tasks.py `land_staged_chunk`).

The key and base URL reach workers through their environment, never as task parameters: the
process pool copies this process's environment; a Dask cluster's workers need it set where they
were started.

What is shared across processes and what is not: each worker process keeps its own stops
(tasks/control/stops.py) and fetch turns (tasks/fetch/lanes.py). A refused key stops that process's calls at once;
the flow stops handing out a dataset's chunks as soon as one comes back stopped, and every other
process learns of the refusal with its own first refused call. `--concurrency` bounds calls in flight
per fetch task, so per dataset up to `--workers` times that many; a retry waiting out a Retry-After
is not handed to another process's chunk: its own chunk waits it out. Progress bars advance as
staged files land rather than per answer. A SIGTERM cancels the flow's process; fetch tasks already
running elsewhere finish their chunk, and their files are landed by the next run if this one is gone.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from prefect.futures import PrefectFuture

from fleet_data.tasks.control import progress
from fleet_data.tasks.steps.refresh_tasks import fetch_staged_chunk, land_staged_chunk
from fleet_data.tasks.plan.due import read_slice
from fleet_data.tasks.staging.area import StagingArea


@dataclass
class Fetchers:
    staging: StagingArea
    workers: int | None = None
    dask: str | None = None
    pids: set[int] = field(default_factory=set)  # the processes that fetched (the summary's `fetched_in`)
    _stack: ExitStack = field(default_factory=ExitStack)
    _runner: Any = None

    @property
    def chunks_in_flight(self) -> int:
        """Per dataset: one more than there are fetchers, so one fetches while the flow lands another."""
        return (self.workers or (2 if self.dask else 1)) + 1

    @property
    def run_id(self) -> str:
        return self.staging.run_id

    def __enter__(self) -> "Fetchers":
        if self.dask:
            from prefect_dask import DaskTaskRunner

            self._runner = self._stack.enter_context(DaskTaskRunner(address=self.dask))
        elif self.workers:
            from prefect.task_runners import ProcessPoolTaskRunner

            self._runner = self._stack.enter_context(ProcessPoolTaskRunner(max_workers=self.workers))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def submit(self, dataset: str, due_path: str | None, offset: int, length: int, concurrency: int,
               budget: int | None) -> PrefectFuture:
        assert due_path is not None  # only a dataset with something due has chunks
        parameters = dict(run_id=self.run_id, dataset=dataset, rows=read_slice(due_path, offset, length), offset=offset,
                          length=length, concurrency=concurrency, budget_left=budget, staging=self.staging.fetch_target())
        if self._runner is None:
            return fetch_staged_chunk.submit(**parameters)  # type: ignore[call-overload]
        return self._runner.submit(fetch_staged_chunk, parameters)

    def land(self, dataset: str, staged: dict[str, Any]) -> None:
        """Land what a fetch task staged (one writer: this process)."""
        land_staged_chunk(self.run_id, dataset, staged["staged"])
        if staged["pid"] != os.getpid():  # fetched elsewhere: nobody advanced this process's bars
            progress.current().advance(dataset, sum(staged[k] for k in ("found", "no_data", "failed", "pending")))
        self.pids.add(staged["pid"])


def chunk_counts(staged: dict[str, Any]) -> dict[str, Any]:
    """A fetch task's counts, as the summary adds them up."""
    return {k: v for k, v in staged.items() if k not in ("staged", "pid")}
