"""Processes a `fleet` command starts die with it, `kill -9` included.

With no PREFECT_API_URL, Prefect runs a temporary API server as a child process
(`prefect.server.api.server.SubprocessASGIServer`) and stops it from an `atexit` handler. A command
killed with SIGKILL runs no handler, and that server stayed alive, orphaned. So the command starts
that server itself, from the main thread, with Prefect's own command and environment, and asks
Linux to SIGKILL it when the command dies (`PR_SET_PDEATHSIG`: the signal comes when the thread
that forked dies, hence the main thread); an `atexit` handler stops it cleanly on a normal exit, as
Prefect's does. Its URL becomes the process's PREFECT_API_URL (`use_local_api` below):
every Prefect client here, and the processes the command starts, use it, and the
command never loads Prefect's server code itself (3.8 s of CPU, which Prefect's client spends when it
has no API URL, before it starts its server). The server has a session of its own: a
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

import atexit
import importlib.util
import contextlib
import ctypes
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
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


def start_prefect_server(meanwhile: Callable[[], object] = lambda: None) -> str | None:
    """Start Prefect's server as a child that dies with this process, and make it this process's Prefect API;
    its API URL, or None. `meanwhile` runs once, while the server starts (it takes some 10 s, mostly in the
    child: the command's own work overlaps it).

    None when Prefect has a server to talk to (PREFECT_API_URL) or no death signal exists here: Prefect then
    starts its own temporary server, as it always does. Call it from the main thread, before any flow runs.
    """
    global _launched
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    launched, _launched = _launched, None
    if PREFECT_API_URL.value() or die_with_this_process() is None:
        if launched:  # Prefect's profile names a server after all: the one started early is not wanted
            stop_server(launched[0])
        meanwhile()
        return None
    timeout = float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
    for attempt in range(3):
        if attempt == 0 and launched:
            server, url = launched
        else:  # Its own session: a terminal's Ctrl-C reaches the command only (module docstring).
            server, url = prefect_server_process(start_new_session=True)
            atexit.register(stop_server, server)
        if attempt == 0:
            meanwhile()
        if wait_for_health(server, url, timeout):
            use_local_api(url)
            return url
        if server.returncode != PORT_TAKEN:
            break
    stop_server(server)
    ended = "" if server.returncode is None else f" (it exited with code {server.returncode})"
    raise RuntimeError(f"Prefect's temporary server did not answer at {url} within {timeout:g} s{ended}; "
                       "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS gives it longer")


_launched: tuple[subprocess.Popen[bytes], str] | None = None  # started by launch_prefect_server, not yet taken


def launch_prefect_server() -> None:
    """Start the temporary server now, before this process imports Prefect (a second or more), for
    `start_prefect_server` to take: both then start side by side. Nothing when PREFECT_API_URL is set, when no
    death signal exists here, or when one was launched already. Call it from the main thread."""
    global _launched
    if _launched or os.environ.get("PREFECT_API_URL") or die_with_this_process() is None:
        return
    _launched = prefect_server_process(start_new_session=True, settings_here=False)
    atexit.register(stop_server, _launched[0])


def abandon_launched_server() -> None:
    """Stop the server `launch_prefect_server` started, if not taken: its command calls nothing after all."""
    global _launched
    if _launched is not None:
        server, _launched = _launched[0], None
        server.kill()  # still starting: nothing of it to keep
        server.wait()


def use_local_api(url: str) -> None:
    """Make `url`, a Prefect server this command started or joined (here, flows/shared_prefect.py), the Prefect API
    of this process and of the processes it starts: PREFECT_API_URL, read again by Prefect (which reads its
    settings once, at import). Its flow runs send no heartbeats (`without_heartbeats`)."""
    from prefect.context import refresh_global_settings_context

    from fleet_data.tasks.control import prefect_api, signals

    os.environ["PREFECT_API_URL"] = url
    with signals.held():  # pydantic reads the settings again: a stop signal is raised after, not inside it
        refresh_global_settings_context()
    without_heartbeats()
    prefect_api.local_server_started(url)


def without_heartbeats() -> None:
    """No flow run heartbeats in this process, on the local server it started or joined: nobody watches them there
    (the temporary server ends with the command; the shared one has no UI nor automation, and stops once unused),
    and a flow run's end waits for the heartbeat thread's one-second sleep (0.5 s on average).
    A profile or variable cannot say "none" (Prefect's setting takes 30 s or more), so the settings Prefect has read
    are changed here (`use_local_api` calls this once it had them read again)."""
    import prefect.context as context

    held = context.GLOBAL_SETTINGS_CONTEXT
    flows = held.settings.flows.model_copy(update={"heartbeat_frequency": None})
    context.GLOBAL_SETTINGS_CONTEXT = held.model_copy(update={"settings": held.settings.model_copy(update={"flows": flows})})


PORT_TAKEN = 3  # uvicorn's exit code when another process took the port between our probe and its bind


def prefect_server_process(start_new_session: bool = False,
                           settings_here: bool = True) -> tuple[subprocess.Popen[bytes], str]:
    """Prefect's API server, run as Prefect runs its temporary one (its command and environment, no UI; its app
    loaded through flows/prefect_app.py, which holds the garbage collector meanwhile), on a free loopback port,
    SIGKILLed when this process dies; the process and its API URL. Not waited for.

    `settings_here`: hand it this process's Prefect settings, as Prefect does (which imports Prefect here). Without,
    it reads them where this process would, from the environment it inherits and the profile, and Prefect need not
    be imported here first (`launch_prefect_server`).
    """
    settings: dict[str, str] = {}
    if settings_here:  # not in the shared server's supervisor, which starts it sooner for not loading them
        from prefect.settings import get_current_settings

        from fleet_data.tasks.control import signals

        with signals.held():  # pydantic serializes the settings: a stop signal is raised after, not inside it
            settings = get_current_settings().to_environment_variables(exclude_unset=True)
    spec = importlib.util.find_spec("prefect")  # where it is installed, without importing it
    assert spec is not None and spec.origin is not None
    with socket.socket() as probe:  # a free port; the server binds it a moment later
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server_env = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1",
                  # Block types are not registered at each start: to see whether they changed, Prefect imports every
                  # collection installed (prefect-dask: dask and distributed), 0.3 s of its 2.6 s start here. A block
                  # registers its type as it is saved (the API key's Secret, flows/apikey.py), whatever server runs.
                  **{name: "false" for name in ("PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION",
                                                "PREFECT_API_BLOCKS_REGISTER_ON_START") if name not in os.environ}}
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--app-dir", str(Path(spec.origin).parent.parent), "--factory",
         "fleet_data.flows.prefect_app:create_app", "--host", "127.0.0.1", "--port", str(port), "--log-level", "error",
         "--lifespan", "on"],
        env={**os.environ, **server_env, **settings}, preexec_fn=die_with_this_process(),
        start_new_session=start_new_session)
    return server, f"http://127.0.0.1:{port}/api"


def wait_for_health(server: subprocess.Popen[bytes], url: str, timeout: float,
                    given_up: Callable[[], bool] = lambda: False) -> bool:
    """Whether the server answered `/health` within `timeout` s (False at once if it exited, or once `given_up`)."""
    import httpx

    deadline = time.monotonic() + timeout
    # One client for every ask: each new one builds a TLS context (about 20 ms of CPU), and ten asks a second
    # spent a second of CPU while the server, on the same two cores, was starting.
    with httpx.Client(timeout=5.0) as client:
        while time.monotonic() < deadline and server.poll() is None and not given_up():
            with contextlib.suppress(httpx.HTTPError):
                if client.get(f"{url}/health").status_code == 200:
                    return True
            time.sleep(0.05)  # each ask before it listens is a refused connection: about 1 ms of CPU
    return False


def stop_server(server: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """Stop the server as Prefect stops its temporary one: SIGTERM, `grace` s, then SIGKILL."""
    if server.poll() is not None:
        return
    server.terminate()
    try:
        server.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
