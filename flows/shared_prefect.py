"""One local Prefect server shared by the commands of this user (FLEET_PREFECT_SERVER=shared, the default).

Without PREFECT_API_URL a command would start Prefect's temporary server, 3-10 s of its wall time, and stop it when
it ends (flows/processes.py, FLEET_PREFECT_SERVER=temporary). Shared, the first command that needs Prefect starts a
server and the next ones reuse it:

- The server is a supervisor process (`python -m fleet_data.flows.shared_prefect`, in a session of its own, its
  output in a log) and Prefect's own uvicorn server, its child, which dies with it (death signal). Their folder,
  `<PREFECT_HOME>/fleet-server/`, holds `server.json` (the supervisor's pid and start time, the URL, the Prefect
  and Python it runs), `lock`, `leases/` and `server.log`.
- A command launches one early (`launch`, before it imports Prefect and checks the key) unless one answers or is
  starting (`starting.json` names a supervisor until its server answers). It joins under the lock: a server that
  answers `/health` and runs this Prefect and this Python is reused, else the one starting is waited for, else one
  is started (the command loads its flows meanwhile, as beside the temporary one). The command then leaves a
  lease, `leases/<pid>`, which names a process gone once it exits (the supervisor removes it then).
- Every second the supervisor counts the live leases, under the lock: none for FLEET_PREFECT_IDLE_SECONDS, it
  stops, so a command joining at that moment either finds it still there (and its lease keeps it) or starts a
  new one. The command that started it gone before any lease (its key refused, or killed), it stops at once;
  SIGTERM too.

The command then makes the server its Prefect API (PREFECT_API_URL, set in the process: flows/processes.py says
why), so its flows, the watch of a lost server and Dask workers work as they do with the temporary server.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

FOLDER = "fleet-server"
STARTING = "starting.json"  # a supervisor started, its server not answering yet
POLL_SECONDS = 1.0
HEALTH_SECONDS = 5.0  # a server that does not answer /health in this long is not reused (a busy one answers in less)


def folder() -> Path:
    """Where the shared server of this PREFECT_HOME keeps its files."""
    from prefect.settings import PREFECT_HOME

    return Path(PREFECT_HOME.value()) / FOLDER


def _folder_before_prefect() -> Path:
    """`folder()` read as Prefect would read PREFECT_HOME, without importing it (`launch` and `abandon` run before)."""
    return Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser() / FOLDER


def launch(idle: float) -> None:
    """Start the shared server now, before this process imports Prefect (a second or more), unless one answers or
    is starting, or PREFECT_API_URL names a server: `join` then waits for it, and the command's own work overlaps
    its start. One never joined (the key refused) stops once this process is gone (`serve`). From the main thread."""
    if os.environ.get("PREFECT_API_URL"):
        return
    # Prefect's settings, read as Prefect would without importing it (flows/cli sets the timeout unless set).
    where = _folder_before_prefect()
    timeout = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS") or 90)
    with _locked(where):
        state = _state(where)
        if (state is not None and _same_software(state) and _answering(state)) or _starting(where) is not None:
            return
        _spawn(where, idle, timeout)


def abandon() -> None:
    """Stop a server this process launched and no command joined (its command calls nothing after all), at once
    rather than once the command has ended, so that it takes no CPU from what the command still does."""
    if not any(child.poll() is None for child in _spawned):
        return  # none launched here (one answered, or PREFECT_API_URL names a server), or it ended
    where = _folder_before_prefect()
    with _locked(where):
        starting = _starting(where)
        for child in _spawned:
            if child.poll() is None and starting is not None and starting["pid"] == child.pid:
                (where / STARTING).unlink(missing_ok=True)  # no command waits for it from now on
                child.terminate()


def join(idle: float, timeout: float, meanwhile: Callable[[], object] = lambda: None) -> str:
    """The API URL of the shared server, started if none answers (or the one starting awaited); this process keeps
    it until it exits. `meanwhile` runs once: while the server starts, or after joining one that runs."""
    where = folder()
    waited = False
    with _locked(where):
        state = _state(where)
        if state is None or not _same_software(state) or not _answering(state):
            starting = _starting(where) or _spawn(where, idle, timeout)
            meanwhile()
            state, waited = _wait(where, starting, timeout), True
        if state["pid"] in {child.pid for child in _spawned}:  # launched here, answering by now or only just
            # A process that outlives the command: said once, where the command says what it does.
            print(f"started Prefect's shared server (pid {state['pid']}, log {where / 'server.log'}): the next "
                  f"commands reuse it; it stops after {idle:g} s unused (FLEET_PREFECT_SERVER=temporary: a "
                  "server per command instead)", file=sys.stderr, flush=True)
        lease = where / "leases" / str(os.getpid())
        lease.parent.mkdir(exist_ok=True)
        # Left when this process ends: the supervisor removes it then, having seen that a command used the server
        # (one that ended between two of its looks too).
        lease.write_text(json.dumps({"started": started_at(os.getpid()), "server": state["pid"]}), encoding="utf-8")
    if not waited:
        meanwhile()
    return str(state["url"])


def use_shared_server(idle: float, meanwhile: Callable[[], object] = lambda: None) -> str | None:
    """Join the shared server and make it this process's Prefect API (PREFECT_API_URL, for its children too).
    None when Prefect has a server to talk to already (PREFECT_API_URL). Call it before any flow runs.
    `meanwhile` runs once, while a server starts if this command starts one (the command loads its flows then)."""
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    from .processes import use_local_api

    if PREFECT_API_URL.value():
        meanwhile()
        return None
    url = join(idle, float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()), meanwhile)
    use_local_api(url)
    return url


def started_at(pid: int) -> str | None:
    """When process `pid` started (its start time in /proc), None if there is none: a reused pid is told apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22, counted from the one after the command's name (3)


@contextlib.contextmanager
def _locked(where: Path) -> Iterator[None]:
    where.mkdir(parents=True, exist_ok=True)
    with open(where / "lock", "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _state(where: Path) -> dict[str, Any] | None:
    try:
        state = json.loads((where / "server.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and {"pid", "started", "url"} <= state.keys() else None


def _software() -> dict[str, str]:
    from importlib.metadata import version  # not Prefect itself: `launch` runs before the command imports it

    return {"prefect": version("prefect"), "python": sys.executable}


def _same_software(state: dict[str, Any]) -> bool:
    return all(state.get(key) == value for key, value in _software().items())


def _answering(state: dict[str, Any]) -> bool:
    import httpx

    if started_at(int(state["pid"])) != state["started"]:
        return False
    try:
        return httpx.get(f"{state['url']}/health", timeout=HEALTH_SECONDS).status_code == 200
    except httpx.HTTPError:
        return False


def _spawn(where: Path, idle: float, timeout: float) -> dict[str, Any]:
    """Start a supervisor, not waiting for it; `STARTING` names it until its server answers (then server.json)."""
    (where / "server.json").unlink(missing_ok=True)
    where = where.resolve()
    with open(where / "server.log", "ab") as log:
        # Its own session and no inherited output: a terminal's Ctrl-C does not stop it, and whoever reads the
        # command's output (a pipe, CI) is not kept waiting on it. Its own folder, not the command's, which may
        # be deleted under it (Prefect's server imports from its working folder as it goes), and so its Prefect
        # home named whole.
        child = subprocess.Popen([sys.executable, "-m", "fleet_data.flows.shared_prefect", "--folder", str(where),
                                  "--idle", f"{idle:g}", "--timeout", f"{timeout:g}",
                                  "--starter", f"{os.getpid()}:{started_at(os.getpid())}"],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                 cwd=where, env=_without_secrets(os.environ) | {"PREFECT_HOME": str(where.parent)})
    _spawned.append(child)  # not collected (and warned about) while this process runs
    starting = {"pid": child.pid, "started": started_at(child.pid), **_software()}
    (where / STARTING).write_text(json.dumps(starting), encoding="utf-8")
    return starting


def _starting(where: Path) -> dict[str, Any] | None:
    """The supervisor starting, if one is alive and runs this Prefect and this Python."""
    try:
        starting = json.loads((where / STARTING).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    alive = isinstance(starting, dict) and started_at(int(starting.get("pid", 0))) == starting.get("started")
    return starting if alive and _same_software(starting) else None


def _wait(where: Path, starting: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The state of the server `starting` names, once it answers (its supervisor writes server.json then)."""
    pid = int(starting["pid"])
    deadline = time.monotonic() + timeout + 5
    while time.monotonic() < deadline:
        state = _state(where)
        if state is not None and state["pid"] == pid:
            return state
        if started_at(pid) != starting["started"] or _reaped(pid):
            raise RuntimeError(f"the shared Prefect server stopped as it started; its log: {where / 'server.log'}")
        time.sleep(0.02)  # a file read: a command waiting for its server loses no more than this
    os.kill(pid, signal.SIGKILL)
    raise RuntimeError(f"the shared Prefect server did not answer within {timeout:g} s; its log: {where / 'server.log'}")


def _reaped(pid: int) -> bool:
    """Whether a supervisor this process started has exited (a zombie still has its /proc entry)."""
    return any(child.pid == pid and child.poll() is not None for child in _spawned)


_spawned: list[subprocess.Popen[bytes]] = []


def _without_secrets(environment: Mapping[str, str]) -> dict[str, str]:
    """The environment the server outlives its command with: no service key, nor anything named like a secret
    (VDS_API_KEY, AWS_SECRET_ACCESS_KEY...), which Prefect's server has no use for."""
    from fleet_data.tasks.settings import SECRET_WORDS

    return {name: value for name, value in environment.items()
            if not name.startswith("VDS_") and not any(word in name.lower() for word in SECRET_WORDS)}


# -- the supervisor ---------------------------------------------------------------------------------------------

def serve(where: Path, idle: float, timeout: float, starter: str = "") -> int:
    """Run Prefect's server until no command has used it for `idle` seconds (or SIGTERM); 0 when it stopped so.
    `starter` (`pid:start time`): the command that started it; gone before any command used it (its key refused, or
    killed), the server stops at once rather than after `idle`."""
    from .processes import prefect_server_process, stop_server, wait_for_health

    stop = _stop_on_signals()
    server, url = prefect_server_process(settings_here=False)  # its settings are this process's: Prefect not imported
    mine = {"pid": os.getpid(), "started": started_at(os.getpid()), "url": url, **_software()}
    if not wait_for_health(server, url, timeout, given_up=lambda: bool(stop)):
        server.kill()
        if stop:  # its command needed it no longer (nothing to call: `abandon`), or stopped so
            print("stopped before it answered", file=sys.stderr, flush=True)
            return 0
        print(f"Prefect's server did not answer at {url} within {timeout:g} s", file=sys.stderr, flush=True)
        return 1
    partial = where / "server.json.tmp"
    partial.write_text(json.dumps(mine), encoding="utf-8")
    os.replace(partial, where / "server.json")
    with _locked(where):  # no longer starting: a server that stops answering is not waited for
        if (_starting(where) or {}).get("pid") == os.getpid():
            (where / STARTING).unlink(missing_ok=True)
    print(f"serving Prefect at {url}; stops after {idle:g} s unused", file=sys.stderr, flush=True)
    used, leased = time.monotonic(), False
    pid, _, since = starter.partition(":")
    code = 0
    while True:
        time.sleep(POLL_SECONDS)
        with _locked(where):  # a command takes its lease under the lock: it is seen here, or sees this one gone
            if server.poll() is not None:
                code = 1
                print(f"Prefect's server exited with code {server.returncode}", file=sys.stderr, flush=True)
            elif live := _live_leases(where, os.getpid()):
                used, leased = time.monotonic(), True
                if not stop:
                    continue
            elif live is None:  # used and left since the last look
                leased = True
                if not stop and time.monotonic() - used < idle:
                    continue
            elif not leased and pid and started_at(int(pid)) != since:
                print("stopping: the command that started it ended before using it", file=sys.stderr, flush=True)
            elif not stop and time.monotonic() - used < idle:
                continue
            if _state(where) == mine:  # not a newer server's (one started while this one did not answer)
                (where / "server.json").unlink(missing_ok=True)
            break
    stop_server(server, grace=10)
    return code


def _stop_on_signals() -> list[int]:
    """A list that gets the signal when SIGTERM, SIGINT or SIGHUP comes (the loop stops then)."""
    received: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: received.append(number))
    return received


def _live_leases(where: Path, server: int) -> int | None:
    """How many commands alive hold a lease on `server`: None when none does but one did (a command that joined
    and ended between two looks). The leases of commands gone are removed."""
    live, held_once = 0, False
    for lease in (where / "leases").glob("*"):
        try:
            held = json.loads(lease.read_text(encoding="utf-8"))
            alive = started_at(int(lease.name)) == held["started"]
        except (OSError, ValueError, KeyError, TypeError):
            alive, held = False, {}
        if not alive:
            lease.unlink(missing_ok=True)
            held_once = held_once or held.get("server") == server
        elif held.get("server") == server:
            live += 1
    return None if not live and held_once else live


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fleet_data.flows.shared_prefect",
                                     description="the shared Prefect server's supervisor (started by `fleet`)")
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--idle", type=float, required=True)
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--starter", default="", help="PID:START_TIME of the command that started it")
    args = parser.parse_args(argv)
    return serve(args.folder, args.idle, args.timeout, args.starter)


if __name__ == "__main__":
    sys.exit(main())
