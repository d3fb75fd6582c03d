"""SIGTERM or SIGINT ends a refresh within seconds: no new call starts, what was fetched and not landed yet lands in
the next run, the rest stays pending, the run is recorded `cancelled` and the command exits with CANCELLED (5). A
second signal stops at once (docs/stopping.md; tests/flows/test_deadlines.py holds the 10 s goal on a loaded machine).

Each case starts `fleet refresh` (or, as a worker runs it, the flow itself) in its own process against a
sandbox in another process where 30% of calls fail with the spec's full `Retry-After` (60 s), so most of the
run's workers are soon waiting out a retry: before cancellation they held the run for minutes after a stop
signal. The signal is sent once answers have come in (the run's progress file says so). The bounds below are
generous limits on a busy machine, not timings: a run that ignores the signal waits 60 s per retry.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import psutil
import pytest

from fleet_data.connectors.sandbox import Sandbox
from fleet_data.tasks.exitcodes import CANCELLED
from fleet_data.tasks.ingest.fleet_files import read_fleet
from fleet_data.tasks.land.recover import land_journals
from fleet_data.tasks.staging.area import StagingArea
from fleet_data.tasks.plan.due import make_plan
from fleet_data.tasks.store.database import open_database

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_fleet.csv"
DATASETS = ("specs", "market_value", "recalls")
PER_VIN = {"/specs": "specs", "/v2/marketvalue": "market_value", "/v1/recalls": "recalls"}


def _answered(journal: list[dict], key: str) -> set[tuple[str, str]]:
    """(dataset, VIN) of every per-VIN call the sandbox answered for `key`."""
    return {(PER_VIN[c["endpoint"]], c["vin"]) for c in journal
            if c["key"] == key and c["endpoint"] in PER_VIN and c["status"] in (200, 404)}


def next_run_lands_every_answer_paid(store, db: Path, journal: list[dict], key: str) -> None:
    """What a stopped run did not land, the next run lands first (its plan step, tasks/land/recover.py); then
    every call the sandbox saw for `key` is recorded, and every answer it gave landed."""
    land_journals(store, StagingArea.beside(str(db), "next-run").root, besides="next-run")
    assert store.sql("SELECT count(*) FROM api_calls").item() == sum(c["key"] == key for c in journal)
    answered = _answered(journal, key)
    landed = set(store.sql("SELECT dataset, vin FROM fetch_status WHERE dataset <> 'recalls' "
                           "UNION ALL SELECT 'recalls', vin FROM recall_checks WHERE checked_via = 'vin'").rows())
    assert answered and answered <= landed
OPTIONS = ["--lake", "", "--datasets", ",".join(DATASETS), "--chunk-size", "50", "--concurrency", "4"]
# A worker's flow-run process: the flow called directly, with Prefect's own handling of SIGTERM around it.
AS_A_WORKER = """
import json, sys
from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import RefreshOptions
options = RefreshOptions(db=sys.argv[2], lake=None, datasets=sys.argv[3].split(","), chunk_size=50, concurrency=4)
state = refresh_fleet([sys.argv[1]], options, return_state=True)
print(json.dumps({"state": state.type.value, "status": state.result(raise_on_failure=False)["status"]}))
"""


@pytest.fixture(scope="module")
def faulty_sandbox():
    sandbox = Sandbox.start_subprocess(["--fault-rate", "0.3", "--fault-statuses", "502,503,504", "--latency-ms", "20",
                                        "--journal"])
    yield sandbox
    sandbox.stop()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("fleet") / "fleet.csv"
    read_fleet([str(SAMPLE)]).roster.head(200).select("unit_number", "vin", "state", "mileage").write_csv(path)
    return str(path)


def _start(how: str, fleet: str, db: Path, key: str, sandbox: Sandbox, home: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API_URL", "VDS_"))}
    env |= {"PYTHONPATH": str(ROOT), "PREFECT_HOME": str(home), "VDS_BASE_URL": sandbox.url, "VDS_API_KEY": key}
    if how == "flow":
        command = [sys.executable, "-c", AS_A_WORKER, fleet, str(db), ",".join(DATASETS)]
    else:
        workers = ["--workers", "2"] if how == "cli-workers" else []
        command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", fleet, "--db", str(db), *OPTIONS, *workers]
    log = (db.parent / "run.log").open("wb")
    # Its own process group, so this test can clean up whatever happens.
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, start_new_session=True)


def _wait_for_answers(process: subprocess.Popen, seen: set[psutil.Process], answered: Callable[[], int]) -> None:
    """Until the sandbox has given 5 per-VIN answers for this run, remembering every process the run started
    meanwhile. (Not the run's progress, nor any 200: a recall batch job's answers come first on some runs, and a
    stop before any per-VIN answer proves nothing; with `--workers` the progress moves a chunk at a time.)"""
    deadline = time.monotonic() + 300  # Prefect's start on a busy 2-core machine included
    while True:
        assert process.poll() is None, "the run ended before it was stopped"
        assert time.monotonic() < deadline, "no answer came in"
        with contextlib.suppress(psutil.Error):
            seen.update(psutil.Process(process.pid).children(recursive=True))
        if answered() >= 5:
            return
        time.sleep(0.1)


def _kill_group(run: subprocess.Popen) -> None:
    """The group outlives its leader: clean up any orphan the run left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.pid, signal.SIGKILL)


def _gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("how, sig", [("cli", signal.SIGTERM), ("cli", signal.SIGINT), ("cli-terminal", signal.SIGINT),
                                      ("flow", signal.SIGTERM), ("cli-workers", signal.SIGTERM)],
                         ids=["fleet-sigterm", "fleet-sigint", "fleet-ctrl-c", "worker-flow-sigterm",
                              "fleet-workers-sigterm"])
def test_a_stop_signal_ends_the_run_cancelled_with_nothing_lost(how, sig, faulty_sandbox, fleet, tmp_path):
    key = f"stop_{how}_{sig.name.lower()}"
    db = tmp_path / "fleet.duckdb"
    run = _start(how, fleet, db, key, faulty_sandbox, tmp_path / "prefect-home")
    started: set[psutil.Process] = set()
    try:
        _wait_for_answers(run, started, lambda: len(_answered(faulty_sandbox.journal(), key)))
        if how == "cli-terminal":  # Ctrl-C: the terminal signals its whole foreground group, children and all
            os.killpg(run.pid, sig)
        else:
            os.kill(run.pid, sig)
        try:
            out, _ = run.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running 30 s after {sig.name}: {(tmp_path / 'run.log').read_text()[-3000:]}")
    finally:
        _kill_group(run)
    log = (tmp_path / "run.log").read_text()
    if how == "flow":
        assert run.returncode == 0, log[-3000:]
        ended = json.loads(out.decode().strip().splitlines()[-1])
        assert ended == {"state": "COMPLETED", "status": "cancelled"}  # not Crashed: the flow ended on its own
    else:
        assert run.returncode == CANCELLED, log[-3000:]
        assert "Traceback" not in log
    deadline = time.monotonic() + 20
    while not all(map(_gone, started)):  # the Prefect server (and anything else the run started) went with it
        assert time.monotonic() < deadline, [p.pid for p in started if not _gone(p)]
        time.sleep(0.2)

    with open_database(str(db)) as store:
        (run_id, status), = store.sql("SELECT run_id, status FROM runs").rows()
        assert status == "cancelled"
        next_run_lands_every_answer_paid(store, db, faulty_sandbox.journal(), key)
        pending = dict(store.sql("SELECT dataset, pending FROM run_datasets WHERE run_id = $r", {"r": run_id}).rows())
        assert sum(pending.values()) > 0  # the rest stays pending...
        # ...and nothing is lost: the next plan asks for every VIN that has no answer yet, and only for those.
        plan = make_plan(store, run_id, list(DATASETS), tmp_path / "next-plan")
        for dataset, due in plan.datasets.items():
            fresh = store.sql("SELECT count(*) FROM fetch_status WHERE dataset = $d", {"d": dataset}).item()
            assert due.due == due.roster - due.not_applicable - fresh
        assert sum(d.due for d in plan.datasets.values()) > 0


def test_a_second_signal_stops_at_once(faulty_sandbox, fleet, tmp_path):
    db = tmp_path / "fleet.duckdb"
    run = _start("cli", fleet, db, "stop_twice", faulty_sandbox, tmp_path / "prefect-home")
    started: set[psutil.Process] = set()
    try:
        _wait_for_answers(run, started, lambda: len(_answered(faulty_sandbox.journal(), "stop_twice")))
        os.kill(run.pid, signal.SIGTERM)
        time.sleep(0.2)
        os.kill(run.pid, signal.SIGTERM)
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("still running 30 s after a second SIGTERM")
    finally:
        _kill_group(run)
    assert run.returncode == -signal.SIGTERM  # ended by the signal itself, as `kill` means it
    deadline = time.monotonic() + 20
    while not all(map(_gone, started)):
        assert time.monotonic() < deadline, [p.pid for p in started if not _gone(p)]
        time.sleep(0.2)


def test_a_signal_while_prefect_starts_ends_the_command_having_called_nothing(faulty_sandbox, fleet, tmp_path):
    db = tmp_path / "fleet.duckdb"
    run = _start("cli", fleet, db, "stop_early", faulty_sandbox, tmp_path / "prefect-home")
    log = tmp_path / "run.log"
    started: set[psutil.Process] = set()
    try:
        deadline = time.monotonic() + 120
        while "starting Prefect" not in log.read_text():  # the plan is printed, Prefect's server is starting
            assert run.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the command never started Prefect"
            time.sleep(0.05)
        started.update(psutil.Process(run.pid).children(recursive=True))
        os.kill(run.pid, signal.SIGTERM)
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("still running 30 s after SIGTERM")
    finally:
        _kill_group(run)
    assert run.returncode == CANCELLED, log.read_text()[-3000:]
    assert "nothing was bought" in log.read_text() and "Traceback" not in log.read_text()
    # At most the free key check made before Prefect starts (connectors/keycheck.py), about no VIN; in the ledger.
    checks = [c for c in faulty_sandbox.journal() if c["key"] == "stop_early"]
    assert len(checks) <= 1 and not any(c["vin"] for c in checks), checks
    with open_database(str(db)) as store:
        assert store.sql("SELECT count(*) FROM runs").item() == 0
        assert store.sql("SELECT count(*) FROM api_calls WHERE vin IS NULL AND units = 0").item() == len(checks)
    deadline = time.monotonic() + 20
    while not all(map(_gone, started)):
        assert time.monotonic() < deadline, [p.pid for p in started if not _gone(p)]
        time.sleep(0.2)


LOADING = r"""
import builtins, importlib, json, os, signal, sys

from fleet_data.flows import commands
from fleet_data.tasks.control.signals import RunCancelled, cancel_on_signals

STEP, MODULE = sys.argv[1], sys.argv[2]
seen = {}
real_module, real_import = importlib.import_module, builtins.__import__


def signalled(load, name, *args, **kwargs):
    # The stop signal lands as the module starts loading (as Prefect starts, or as the command first imports it).
    if "signalled" in seen:
        return load(name, *args, **kwargs)
    seen["signalled"] = True
    os.kill(os.getpid(), signal.SIGTERM)
    loaded = load(name, *args, **kwargs)
    seen["loaded"] = name
    return loaded


def import_module(name, *args, **kwargs):  # how `load_flows` imports
    return (signalled(real_module, name, *args, **kwargs) if name == MODULE
            else real_module(name, *args, **kwargs))


def import_statement(name, *args, **kwargs):  # `from prefect.settings import ...`
    return (signalled(real_import, name, *args, **kwargs) if name == MODULE and MODULE not in sys.modules
            else real_import(name, *args, **kwargs))


importlib.import_module, builtins.__import__ = import_module, import_statement
try:
    with cancel_on_signals("run-1", started=False):
        getattr(commands, STEP)()
except RunCancelled as exc:
    seen["cancelled"] = str(exc)
builtins.__import__ = real_import
print(json.dumps(seen))
"""


@pytest.mark.parametrize(("step", "module"), [("load_flows", "fleet_data.flows.refresh"),
                                              ("prefect_api_answers", "prefect.settings")])
def test_a_signal_while_prefect_loads_cancels_after_the_import_not_inside_it(tmp_path, step, module):
    """Raised inside the import, the signal's RunCancelled became pydantic's SchemaError (a model's validator was
    being built), and the command said it was a bug: Prefect and the flows load with the signal held
    (flows/commands.py `load_flows`, `prefect_api_answers`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "VDS_", "FLEET_"))}
    env["PREFECT_HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", LOADING, step, module], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen.get("loaded") == module, seen  # the import ran to its end
    assert "SIGTERM before the run started" in seen.get("cancelled", ""), seen
    assert "SIGTERM: stopping within seconds" in done.stderr
