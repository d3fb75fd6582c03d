"""Where a refresh's fetch tasks run, and the lander that takes their staged files.

- default: the flow's own threads (Prefect's thread runner), as always;
- `--workers N`: N processes of this machine (Prefect's `ProcessPoolTaskRunner`);
- `--dask ADDRESS`: an existing Dask cluster (prefect-dask's `DaskTaskRunner`).

Only fetch tasks go there; ingest, plan, recall batches, landing and finishing stay in the flow's
process, which is the one writer of the database. A fetch task takes a slice of the due list and
returns where it staged the answers (`--staging`, else the run's local staging folder); the flow
lands the files as they arrive, those that came back together in one transaction
(tasks/steps/refresh_tasks.py `land_staged_chunk`).

What a fetch task needs reaches it from the flow, never from the worker's environment: the service's
base URL and key, the staging area's endpoint and credentials, the retry window, in one task parameter
(`FetchAccess`) whose secrets are `SecretStr` (Prefect and Dask show `**********`). A Dask worker reports
its task runs to the flow's Prefect API: the flow's settings travel with each task (prefect-dask), and
when the flow uses Prefect's temporary server, its address is put in them, so that no worker starts a
server of its own. Before anything is called, the cluster is checked (`check_cluster`): it answers, has
workers, each runs this fleet-data version and reaches that API and the staging bucket; else one line
says what is wrong (`ClusterError`, exit code 2 in `fleet`).

What is shared across processes and what is not: each worker process keeps its own stops
(tasks/control/stops.py) and fetch turns (tasks/fetch/lanes.py). A refused key stops that process's calls at once;
the flow stops handing out a dataset's chunks as soon as one comes back stopped, and every other
process learns of the refusal with its own first refused call. `--concurrency` bounds calls in flight
per fetch task, so per dataset up to `--workers` times that many; a retry waiting out a Retry-After
is not handed to another process's chunk: its own chunk waits it out. Progress bars advance as
staged files land rather than per answer. A SIGTERM cancels the flow's process, and the run's stop reaches the
chunks elsewhere: `--workers` processes still in a chunk are ended after the chunks' deadline (`stop_pool`), chunks
on a Dask cluster watch an Event the flow sets (tasks/control/remote_stop.py); what they journalled lands in the
next run.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from prefect.futures import PrefectFuture

from fleet_data.tasks.control.resources import SERVICE_LOST, ResourceLost, halted
from fleet_data.tasks.control.signals import cancelled
from fleet_data.tasks.control import quiet, remote_stop
from fleet_data.tasks.control.services import AGAIN, INTERVAL, ServiceWatch

from fleet_data.tasks.errors import UsageError
from fleet_data.tasks.control import progress
from fleet_data.tasks.steps.refresh_tasks import ChunkRows, FetchAccess, StagedChunk, fetch_staged_chunk, land_staged_chunk
from fleet_data.tasks.plan.due import due_rows
from fleet_data.tasks.run.context import current
from fleet_data.tasks.staging.area import StagingArea, is_remote, reach


@dataclass
class Fetchers:
    staging: StagingArea
    workers: int | None = None
    dask: str | None = None
    retry_window: float | None = None  # the run's (tasks/control/retry_window.py), wherever its chunks run
    pids: set[int] = field(default_factory=set)  # the processes that fetched (the summary's `fetched_in`)
    # History lands in this run: a valuation chunk reads its mileage again as it starts (tasks/plan/due.py due_rows).
    mileage_moves: bool = False
    _stack: ExitStack = field(default_factory=ExitStack)
    _runner: Any = None
    _access: FetchAccess | None = None

    @property
    def chunks_in_flight(self) -> int:
        """Per dataset: one more than there are fetchers, so one fetches while the flow lands another."""
        return (self.workers or (2 if self.dask else 1)) + 1

    @property
    def run_id(self) -> str:
        return self.staging.run_id

    def __enter__(self) -> "Fetchers":
        self._access = FetchAccess.of_this_process(self.staging.fetch_target(), self.retry_window)
        if self.dask or self.workers:
            self._access = self._access.model_copy(update={"elsewhere": True})
        if self.dask:
            self._access = self._access.model_copy(update={  # a lost worker's task runs elsewhere; a stop reaches them
                "copies": True, "stop_event": remote_stop.name(self.run_id)})
            from prefect_dask import DaskTaskRunner

            try:
                api_url = self._stack.enter_context(api_for_workers())
                self._runner = self._stack.enter_context(DaskTaskRunner(address=self.dask))
                check_cluster(self._runner.client, self.dask, api_url, self._access)  # the client connects here
                quiet.hide_lost_connections("distributed.client")  # its scheduler lost: said once, as exit code 9
                watch = ClusterWatch(self.run_id, self.dask, self._runner.client)  # lost mid-run: the run halts
                watch.start()
                self._stack.callback(watch.stop)
                relay = remote_stop.Relay(self.run_id, self._runner.client,
                                          lambda: cancelled(self.run_id) or halted(self.run_id) is not None)
                relay.start()
                self._stack.callback(relay.stop)
            except (OSError, TimeoutError) as exc:
                self._stack.close()
                raise ClusterError(unreachable(self.dask, exc)) from None
            except BaseException:
                self._stack.close()
                raise
        elif self.workers:
            from prefect.task_runners import ProcessPoolTaskRunner

            self._stack.enter_context(api_for_workers())  # not a temporary server per worker process (orphaned when ended)
            self._runner = self._stack.enter_context(ProcessPoolTaskRunner(max_workers=self.workers))
        return self

    def __exit__(self, *exc: object) -> None:
        if self.workers and not self.dask and (cancelled(self.run_id) or halted(self.run_id)):
            stop_pool(self._runner)
        self._stack.close()

    def result(self, future: PrefectFuture) -> StagedChunk:
        """What a fetch task staged; a Dask scheduler or its workers lost under it raise the run's halt
        (ResourceLost, SERVICE_LOST: exit code 9), never a bug."""
        try:
            return future.result()
        except Exception as exc:
            if not (self.dask and cluster_lost(exc)):
                raise
            quiet.silence("distributed")
            raise ResourceLost(ClusterWatch.lost_line(self.dask, datetime.now(timezone.utc), type(exc).__name__),
                               SERVICE_LOST) from exc

    def submit(self, dataset: str, due_path: str | None, offset: int, length: int, concurrency: int,
               budget: int | None) -> PrefectFuture:
        assert due_path is not None  # only a dataset with something due has chunks
        store = current(self.run_id).store if self.mileage_moves else None
        rows = due_rows(store, dataset, due_path, offset, length)  # read as the chunk starts
        parameters = dict(run_id=self.run_id, dataset=dataset, rows=ChunkRows(rows), offset=offset,
                          length=length, concurrency=concurrency, budget_left=budget, access=self._access)
        if self._runner is None:
            return fetch_staged_chunk.submit(**parameters)  # type: ignore[call-overload]
        return self._runner.submit(fetch_staged_chunk, parameters)

    def land(self, chunks: list[tuple[str, StagedChunk]]) -> None:
        """Land what fetch tasks staged (one writer: this process), the chunks that came back together in one
        transaction. A chunk with journals of lost attempts (a Dask worker gone mid-chunk) lands alone, those first,
        as they were fetched: an answer there may be a failure its re-run answered."""
        together = [staged.staged for _, staged in chunks if not staged.earlier]
        if together:
            land_staged_chunk(self.run_id, ", ".join(dict.fromkeys(d for d, s in chunks if not s.earlier)), together)
        for dataset, staged in chunks:
            if staged.earlier:
                for location in [*staged.earlier, staged.staged]:
                    land_staged_chunk(self.run_id, dataset, [location])
            if staged.pid != os.getpid():  # fetched elsewhere: nobody advanced this process's bars
                progress.current().advance(dataset, staged.outcome.settled)
            self.pids.add(staged.pid)


def stop_pool(runner: Any, grace: float = 2.0) -> None:
    """A stopped run's `--workers` processes, ended: one still in a chunk (a retry waiting out a Retry-After of a
    minute) would hold the pool's close, which waits for it. What it journalled stays on this machine's disk, where
    the next run lands it, as after a kill. SIGTERM first; what is still there after `grace` seconds, SIGKILL."""
    processes = [p for p in getattr(getattr(runner, "_executor", None), "_processes", {}).values() if p.is_alive()]
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + grace
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()


class ClusterError(UsageError, ValueError):
    """The Dask cluster cannot fetch for this run; one line saying why and what to do."""


@contextlib.contextmanager
def api_for_workers() -> Iterator[str]:
    """The flow's Prefect API, in the settings that travel with each task to a Dask worker or a `--workers` process.

    With PREFECT_API_URL set, that one. Without, the flow runs on Prefect's temporary server, which a
    worker's settings do not name: the worker would start one of its own (a server per worker process, 10 s or
    more each, left running when the workers stop or are ended by a stop signal). So the temporary server's
    address is set for the block.
    """
    from prefect.settings import PREFECT_API_URL, temporary_settings

    url = PREFECT_API_URL.value()
    if url:
        yield url
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the one this process's Prefect client uses (flows/processes.py)
    server.start()  # running already: nothing happens
    with temporary_settings({PREFECT_API_URL: server.api_url}):
        yield server.api_url


def check_cluster(client: Any, address: str, api_url: str | None, access: FetchAccess | None = None) -> None:
    """Refuse a cluster that cannot fetch, before anything is called: no workers, a worker without this
    fleet-data, or one that cannot reach the flow's Prefect API or, with the flow's credentials, the
    object storage it stages on (`access`). Raises ClusterError."""
    from importlib.metadata import version

    try:
        answers = client.run(worker_check, api_url, access, on_error="return")
    except Exception as exc:  # noqa: BLE001 - the scheduler went away or refused: say so in one line
        raise ClusterError(f"--dask {address}: the cluster could not run a check ({type(exc).__name__}: {exc})") from None
    if not answers:
        raise ClusterError(f"--dask {address}: the cluster has no workers; start some with `dask worker {address}`")
    ours = version("fleet-data")
    for worker, answer in sorted(answers.items()):
        if isinstance(answer, BaseException):
            why = f"{type(answer).__name__}: {answer}"
            raise ClusterError(f"--dask {address}: worker {worker} cannot fetch ({' '.join(why.split())[:200]}); "
                               f"install the fleet-data wheel on every worker and check it reaches {api_url}"
                               + (f" and {access.staging}" if access and is_remote(access.staging) else ""))
        if answer != ours:
            raise ClusterError(f"--dask {address}: worker {worker} runs fleet-data {answer}, this machine {ours}; "
                               "install the same wheel on every worker")


def worker_check(api_url: str | None, access: FetchAccess | None = None) -> str:
    """Run on each Dask worker by `check_cluster`: its fleet-data version, once it has reached the Prefect API
    and the staging area on object storage (listed with the flow's credentials)."""
    from importlib.metadata import version

    import httpx

    if api_url:
        try:
            httpx.get(f"{api_url.rstrip('/')}/health", timeout=httpx.Timeout(10.0))
        except httpx.TransportError as exc:
            raise ConnectionError(f"cannot reach the flow's Prefect API at {api_url} ({exc})") from None
    if access is not None and is_remote(access.staging):
        reach(access.staging, access.storage)
    return version("fleet-data")


def check_cluster_at(address: str, staging: str | None = None) -> None:
    """`check_cluster` from the command line, before the flow starts (its Prefect API already chosen)."""
    from distributed import Client

    access = FetchAccess.of_this_process(staging, None) if staging else None
    try:
        with api_for_workers() as api_url, Client(address, timeout="30s", set_as_default=False) as client:
            check_cluster(client, address, api_url, access)
    except (OSError, TimeoutError) as exc:
        raise ClusterError(unreachable(address, exc)) from None


# What distributed raises for a task whose scheduler went away, or whose workers kept dying under it.
_CLUSTER_LOST = frozenset({"FutureCancelledError", "CommClosedError", "KilledWorker"})


def cluster_lost(exc: BaseException) -> bool:
    return any(kind.__name__ in _CLUSTER_LOST for kind in type(exc).__mro__)


class ClusterWatch(ServiceWatch):
    """The Dask cluster, asked how many worker threads it has: none, `MISSES` times in a row, is a cluster lost (a
    task waiting for a worker would wait for ever)."""

    name = "dask-watch"
    NO_WORKERS = "no worker left"

    def __init__(self, run_id: str, address: str, client: Any):
        super().__init__(run_id)
        self.address, self.client = address, client

    def probe(self) -> None:
        if not self.client.nthreads(callback_timeout=INTERVAL):
            raise LookupError(self.NO_WORKERS)

    def is_miss(self, exc: Exception) -> bool:
        """Only "no workers" counts: a busy scheduler may be slow to say, and a lost one cancels the run's futures
        (`Fetchers.result`)."""
        return str(exc) == self.NO_WORKERS

    def line(self, since: datetime, why: str) -> str:
        return self.lost_line(self.address, since, why)

    def on_lost(self) -> None:
        quiet.silence("distributed")

    @classmethod
    def lost_line(cls, address: str, since: datetime, why: str) -> str:
        what = ("every worker of the Dask cluster at {} is gone" if why == cls.NO_WORKERS
                else "the Dask scheduler at {} stopped answering").format(address)
        return (f"{what} (since {since:%H:%M:%S} UTC: {' '.join(why.split())[:160]}): the run stopped calling; what the "
                f"workers fetched lands at the next run on their machines; {AGAIN}")


def unreachable(address: str, exc: BaseException) -> str:
    return (f"--dask {address}: no Dask scheduler answers there ({' '.join(str(exc).split())[:200]}); "
            "start one with `dask scheduler`, or fix the address")
