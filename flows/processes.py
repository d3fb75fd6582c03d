"""Processes a `fleet` command starts die with it, `kill -9` included.

With no PREFECT_API_URL, Prefect runs a temporary API server as a child process
(`prefect.server.api.server.SubprocessASGIServer`) and stops it from an `atexit` handler. A command
killed with SIGKILL runs no handler, and that server stayed alive, orphaned. So the command starts
that server itself, from the main thread, with Prefect's own command and environment, and asks
Linux to SIGKILL it when the command dies (`PR_SET_PDEATHSIG`: the signal comes when the thread
that forked dies, hence the main thread). It registers as Prefect's one temporary server (Prefect
keeps one per port, and asks for port None), so every Prefect client in the process uses it, and
Prefect's `atexit` handler still stops it cleanly on a normal exit. The server has a session of its own: a
terminal's Ctrl-C (sent to the whole foreground group) reaches the command only, which stops its run and
still reports its end to the server; had the server stopped at the same moment, the run would have waited on
it, retrying, for minutes.

The embedded sandbox is a thread of the command and Prefect's task runner uses threads: both end
with the process anyway. `fleet serve` runs each flow run in a child that Prefect spawns
(`multiprocessing`, from a thread we do not choose, so no death signal): the flow, first thing,
watches its parent there and cancels itself when it is gone (`die_with_parent_process`). A worker's
flow run is Prefect's engine, started by `fleet_data.flows.engine` with a death signal (SIGTERM).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
ORPHAN_SECONDS = 30.0  # a served flow run's time to cancel itself once `fleet serve` is gone, before it is killed


def die_with_this_process(signum: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A `preexec_fn` that makes the child get `signum` (SIGKILL) when this process dies (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def set_death_signal() -> None:  # runs in the child, between fork and exec
        prctl(PR_SET_PDEATHSIG, signum)
        if os.getppid() != parent:  # the command died before the line above: nobody will signal us
            os.kill(os.getpid(), signum)

    return set_death_signal


def die_with_parent_process(every: float = 1.0, orphan_seconds: float = ORPHAN_SECONDS) -> bool:
    """In a `multiprocessing` child (a flow run `fleet serve` started), end once its parent is gone.

    First it takes a process group of its own: a terminal's Ctrl-C then reaches `fleet serve` only, which
    passes one SIGTERM on (two would stop the run at once, unrecorded: tasks/control/signals.py). A daemon
    thread polls the parent pid (an orphan is adopted by another process). Once the parent is gone (stopped,
    or killed with SIGKILL), the run gets SIGTERM unless a stop signal reached it already: it cancels itself,
    lands what it fetched and records itself; if it is still there `orphan_seconds` later, it is killed (the
    next run resumes the work). Does nothing, and returns False, in any other process, or when already watching.
    """
    global _watching
    spawner = multiprocessing.parent_process()
    if spawner is None or _watching:
        return False
    _watching = True
    parent = spawner.pid  # not getppid(): the parent may be gone already, and this process adopted
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    outlive_closed_output()

    def watch() -> None:
        from fleet_data.tasks.control.signals import stop_requested

        while os.getppid() == parent:
            time.sleep(every)
        if not stop_requested():
            os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(orphan_seconds)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()
    return True


_watching = False


def outlive_closed_output() -> None:
    """In a flow run's own process: when its output's reader is gone, go on silently instead of ending.

    Prefect's console logging writes with rich, whose answer to a closed pipe is `SystemExit(1)`: a flow
    run cancelling itself after `fleet serve` or a worker stopped ended there, in the middle of landing,
    recorded nowhere. Here the output goes to /dev/null and the run lands and records itself.
    """
    from rich.console import Console

    def go_quiet(self: Any) -> None:
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                os.dup2(devnull, stream.fileno())

    Console.on_broken_pipe = go_quiet  # type: ignore[method-assign]


def start_prefect_server() -> str | None:
    """Start Prefect's temporary server as a child that dies with this process; its API URL, or None.

    None when Prefect has a server to talk to (PREFECT_API_URL) or no death signal exists here:
    Prefect then does what it always does. Call it from the main thread, before any flow runs.
    """
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value() or die_with_this_process() is None:
        return None
    server = prefect_server_instance()
    server.start()  # does nothing if it is running already
    return server.api_url


def prefect_server_instance() -> Any:
    """Prefect's one temporary server of this process: the instance its own `SubprocessASGIServer()` returns (asked
    for with no port), of our class when we make it first."""
    return _child_server_class()()


@functools.cache
def _child_server_class() -> type:
    """Prefect's temporary server, started with the death signal (imported late: Prefect's server is heavy)."""
    from prefect.server.api.server import SubprocessASGIServer

    class ChildServer(SubprocessASGIServer):
        def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
            """Prefect's own command (SubprocessASGIServer._run_uvicorn_command), plus the death signal."""
            import prefect
            from prefect.settings import get_current_settings

            server_env = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
            return subprocess.Popen(
                args=[sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent),
                      "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1",
                      "--port", str(self.port), "--log-level", "error", "--lifespan", "on"],
                env={**os.environ, **server_env,
                     **get_current_settings().to_environment_variables(exclude_unset=True)},
                preexec_fn=die_with_this_process(),
                start_new_session=True,  # no terminal signal: it ends with the command (module docstring)
            )

    return ChildServer
