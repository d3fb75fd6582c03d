"""The process a work-pool worker starts for a flow run: Prefect's engine as its child, which outlives the worker.

A worker stopped by SIGINT or SIGTERM (`prefect worker start`, Prefect 3.8) leaves within seconds and takes
the flow run's process down with it: SIGTERM, then SIGKILL, and the pipe that carried the run's output
closes, so Prefect's console logging ends the engine (`SystemExit` on a broken pipe) even after a SIGTERM
it handles. The run could neither land what it fetched nor record itself: `Crashed` in Prefect, `running`
in our table until the next run. `prefect.yaml` makes this module the process job's `command`:

- this process (what the worker tracks and kills) starts `python -m prefect.engine` through `--engine`
  below, in a session of its own, relays its output, and passes the first SIGINT or SIGTERM on: a
  cancellation from Prefect's UI or a stopping worker reaches the run once;
- the engine gets SIGHUP when this process dies (PR_SET_PDEATHSIG): it points its output at /dev/null
  and, unless a stop signal reached it already, sends itself SIGTERM. The flow's handler then cancels
  the run (tasks/control/signals.py): what was fetched lands, the run is recorded `cancelled`, the lock is
  released, and Prefect's engine reports the flow run's final state.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import signal
import subprocess
import sys
from typing import Any

from .processes import die_with_this_process, outlive_closed_output

ENGINE = "--engine"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == [ENGINE]:
        return _engine(args[1:])
    engine = subprocess.Popen([sys.executable, "-m", "fleet_data.flows.engine", ENGINE, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, start_new_session=True,
                              preexec_fn=die_with_this_process(signal.SIGHUP))

    passed: list[int] = []

    def pass_on(signum: int, frame: Any) -> None:
        # The first only: a terminal's Ctrl-C reaches this process and the worker, which then sends SIGTERM
        # here too, and a second signal would stop the run at once, unrecorded.
        if not passed:
            passed.append(signum)
            with contextlib.suppress(ProcessLookupError):
                os.kill(engine.pid, signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, pass_on)
    _relay(engine.stdout)
    code = engine.wait()
    return code if code >= 0 else 128 - code  # killed by a signal: as a shell reports it


def _relay(source: Any) -> None:
    """Copy the engine's output to ours until it ends; once ours is gone (the worker left), keep draining it."""
    out: int | None = sys.stdout.fileno()
    for chunk in iter(lambda: source.read1(65536), b""):
        if out is not None:
            try:
                os.write(out, chunk)
            except OSError:
                out = None


def _engine(args: list[str]) -> int:
    """Prefect's engine, in this process, ready for its parent's death (see the module docstring)."""
    signal.signal(signal.SIGHUP, _parent_gone)
    outlive_closed_output()
    sys.argv = ["prefect.engine", *args]
    runpy.run_module("prefect.engine", run_name="__main__", alter_sys=True)
    return 0


def _parent_gone(signum: int, frame: Any) -> None:
    from fleet_data.tasks.control.signals import stop_requested

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    if not stop_requested():  # a second SIGTERM would stop the run at once, unrecorded
        os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    sys.exit(main())
