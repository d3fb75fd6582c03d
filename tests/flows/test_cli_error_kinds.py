"""Each kind of our errors ends `fleet` with its own exit code and one line, wherever it is raised.

The code is the kind's (tasks/errors.py, the table tasks/exitcodes.py) and flows/cli/errors.py is the one
place that says it: here each kind is raised from inside a real `fleet status` (where its first check
runs), as a kind raised deep in a run would reach the command line, and the JSON error names the code's
kind. Those that are bugs (a landing the store refused, a call not started escaping its run) say so.
"""

from __future__ import annotations

import json

import pytest

from fleet_data.flows import checks
from fleet_data.flows.apikey import MissingKey
from fleet_data.flows.checks import CommandError
from fleet_data.flows.cli import main
from fleet_data.flows.config import ConfigError
from fleet_data.flows.fetchers import ClusterError
from fleet_data.tasks.control.faults import EnvironmentFault
from fleet_data.tasks.control.memory import OutOfMemory
from fleet_data.tasks.control.resources import ResourceLost
from fleet_data.tasks.control.stops import Stopped
from fleet_data.tasks.errors import FleetError
from fleet_data.tasks.exitcodes import BUG, BUSY, KINDS, NO_MEMORY, NO_SPACE, STORE_LOST, USAGE
from fleet_data.tasks.ingest.fleet_files import FleetFileError
from fleet_data.tasks.plan.provenance import RunRefused
from fleet_data.tasks.run.lock import RunLocked
from fleet_data.tasks.settings import SettingsError
from fleet_data.tasks.store.database import DatabaseBusy, DatabaseError, DatabaseUnusable

KINDS_RAISED: list[tuple[FleetError, int]] = [
    (CommandError("--runs 0: show 1 run or more"), USAGE),
    (CommandError("fleet.duckdb is in use by another run", BUSY), BUSY),
    (SettingsError("FLEET_CONCURRENCY 'x' is not a whole number"), USAGE),
    (ConfigError("fleet.toml: not TOML"), USAGE),
    (EnvironmentFault("lake: a file is in the way"), USAGE),
    (DatabaseUnusable("fleet.duckdb: not a DuckDB database"), USAGE),
    (FleetFileError("fleet.csv", "no VIN column found"), USAGE),
    (RunRefused("this clock is behind the database's last run"), USAGE),
    (MissingKey("no key in VDS_API_KEY or the Secret block"), USAGE),
    (ClusterError("the Dask workers cannot reach Prefect"), USAGE),
    (RunLocked("fleet.duckdb", None), BUSY),
    (DatabaseBusy("fleet.duckdb: DuckDB's lock is held"), BUSY),
    (ResourceLost("disk full under the lake", "no_space"), NO_SPACE),
    (ResourceLost("the working store was deleted", "store_lost"), STORE_LOST),
    (OutOfMemory("not enough memory to read the roster"), NO_MEMORY),
    (DatabaseError("a landing was refused"), BUG),
    (Stopped("the key is stopped"), BUG),
]


@pytest.mark.parametrize("error,code", KINDS_RAISED, ids=lambda e: type(e).__name__ if isinstance(e, Exception) else str(e))
def test_each_kind_ends_fleet_with_its_code(error, code, monkeypatch, tmp_path, capsys):
    def raising(args):
        raise error

    monkeypatch.setattr(checks, "check_status", raising)
    assert error.code == code  # the kind carries its code
    assert main(["status", "--db", str(tmp_path / "fleet.duckdb"), "--json"]) == code
    out, err = capsys.readouterr()
    said = json.loads(out)["error"]
    assert said["code"] == code and said["kind"] == KINDS[code]
    if code == BUG:
        assert said["message"].startswith(f"status stopped on an unexpected {type(error).__name__}: ")
        assert "this is a bug" in said["message"]
    else:
        assert said["message"] == str(error)


def test_the_same_kinds_as_one_text_line(monkeypatch, tmp_path, capsys):
    def raising(args):
        raise FleetFileError("fleet.csv", "no VIN column found")

    monkeypatch.setattr(checks, "check_status", raising)
    assert main(["status", "--db", str(tmp_path / "fleet.duckdb")]) == USAGE
    out, err = capsys.readouterr()
    assert out == "" and err == "error: fleet.csv: no VIN column found\n"


def test_an_error_not_ours_is_a_bug_in_one_line(monkeypatch, tmp_path, capsys):
    def raising(args):
        raise ValueError("an index out of step")  # not ours: no longer taken for the user's mistake

    monkeypatch.setattr(checks, "check_status", raising)
    assert main(["status", "--db", str(tmp_path / "fleet.duckdb")]) == BUG
    err = capsys.readouterr().err
    assert err.startswith("error: status stopped on an unexpected ValueError: an index out of step (this is a bug")
