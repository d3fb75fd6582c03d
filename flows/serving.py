"""`fleet serve`'s process: Prefect's runner in a thread, stopped within seconds by SIGINT or SIGTERM.

`prefect.serve` runs the runner on the main thread. On SIGTERM it asks the runner to stop, which waits
for the flow run in progress to end (a refresh takes minutes or hours), and SIGINT left it waiting the
same way. Here the runner has a thread of its own and the main thread only waits for a signal. The
first SIGINT or SIGTERM:
1. sends SIGTERM to the flow run in progress (a child process, in a process group of its own so a
   terminal's Ctrl-C does not reach it twice): the flow's own handler cancels the run
   (tasks/control/signals.py): no new call starts, what was fetched lands, the run is recorded
   `cancelled` and the database's lock released;
2. waits up to GRACE_SECONDS for it; if it is done, stops the runner (Prefect pauses the served
   schedules, as it does on shutdown) for up to RUNNER_STOP_SECONDS, and exits;
3. else leaves it to finish alone and exits: the flow run, seeing its parent gone, has ORPHAN_SECONDS
   more before it kills itself (flows/processes.py).
A second signal kills the flow run at once (the next run lands what it had received).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from multiprocessing.process import BaseProcess
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACE_SECONDS = 6.0  # waited for the flow run to land what it fetched and record itself; 10 s is the promise
RUNNER_STOP_SECONDS = 1.5  # for the runner to pause the schedules (twice: to stop, then to end its thread)


def serve_until_stopped(deployments: list[Any], flow: Any, limit: int = 1) -> int:
    """Serve `deployments` of `flow` until SIGINT or SIGTERM; 0 when stopped by a signal, 1 if the runner failed."""
    from prefect.runner import Runner

    runner = Runner(limit=limit)
    for deployment in deployments:
        deployment_id: Any = runner.add_deployment(deployment)  # registered with the server before anything is served
        # As `Runner.add_flow` does: its runs then start as this process's `multiprocessing` children running
        # the flow object, where the flow watches its parent (flows/processes.py). Without it (`prefect.serve`)
        # each run was `python -m prefect.engine` behind a pipe, which died with this process.
        runner._deployment_registry.register_flow(deployment_id, flow)
    stop, received = threading.Event(), []

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signum)
        if len(received) > 1:  # again: no more waiting for the flow run
            _kill(multiprocessing.active_children(), signal.SIGKILL)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in SIGNALS}
    loop = asyncio.new_event_loop()
    failed: list[BaseException] = []
    thread = threading.Thread(target=_run, args=(loop, runner, failed), name="prefect-runner", daemon=True)
    thread.start()
    print(f"Serving {', '.join(d.name for d in deployments)}; stop with Ctrl-C or SIGTERM", file=sys.stderr, flush=True)
    try:
        while not stop.wait(0.5) and thread.is_alive():
            pass
        if received:
            name = signal.Signals(received[0]).name
            print(f"{name}: stopping the flow run in progress (it lands what it fetched) and the runner",
                  file=sys.stderr, flush=True)
            if _stop_flow_runs(received):
                _stop_runner(loop, runner, thread)
            else:  # stopping the runner would signal it again
                print("the flow run is still landing what it fetched: it ends by itself", file=sys.stderr, flush=True)
            # Now, not through Python's exit: it would wait for a flow run still ending (multiprocessing joins
            # its children) and for Prefect's exit handlers, none of which has anything left to record.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failed and not received:
        print(f"error: the Prefect runner stopped: {type(failed[0]).__name__}: {failed[0]}", file=sys.stderr)
        return 1
    return 0


def _run(loop: asyncio.AbstractEventLoop, runner: Any, failed: list[BaseException]) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(runner.start())
    except BaseException as exc:  # noqa: BLE001 - reported by the main thread
        failed.append(exc)


def _stop_flow_runs(received: list[int]) -> bool:
    """SIGTERM to each flow run in progress (this process's `multiprocessing` children); whether all ended in time."""
    children = multiprocessing.active_children()
    _kill(children, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    while time.monotonic() < deadline:
        alive = [c for c in children if _alive(c)]
        if not alive or len(received) > 1:  # a second signal has killed them
            return not alive
        # Sentinels: ready when a child ends, without reaping it (the runner's thread does that).
        multiprocessing.connection.wait([c.sentinel for c in alive], timeout=min(0.5, deadline - time.monotonic()))
    return not any(_alive(c) for c in children)


def _alive(child: BaseProcess) -> bool:
    with contextlib.suppress(ValueError, OSError):
        return not multiprocessing.connection.wait([child.sentinel], timeout=0)
    return False


def _kill(children: list[BaseProcess], signum: int) -> None:
    for child in children:
        if child.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signum)


def _stop_runner(loop: asyncio.AbstractEventLoop, runner: Any, thread: threading.Thread) -> None:
    """Ask the runner to stop on its own loop; leave after RUNNER_STOP_SECONDS whatever it is doing."""
    if not thread.is_alive():
        return
    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(runner.astop(), loop).result(timeout=RUNNER_STOP_SECONDS)
    thread.join(timeout=RUNNER_STOP_SECONDS / 2)
