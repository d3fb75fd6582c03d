"""What `fleet` needs of the system and of the install, said in one line with exit code 2 before anything starts.

- Linux and macOS only (flows/cli/system.py): without POSIX file locks (`fcntl`, which Windows lacks) every command
  is refused, where it once failed on the import as "a bug" (exit 1). Simulated here by hiding the module.
- `--dask` needs the `dask` extra and `--staging s3://` the `s3` one (tasks/settings.py `EXTRAS`): without it, the
  option is refused naming the extra. Simulated here by hiding a module; tests/test_packaging.py shows the same from
  a real install without extras.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import SAMPLE

WITHOUT = ("import sys\n"
           "for name in sys.argv[1].split(','):\n"
           "    sys.modules[name] = None  # `import name` now fails, as where the module does not exist\n"
           "from fleet_data.flows.cli import main\n"
           "sys.exit(main(sys.argv[2:]))\n")


def fleet_without(modules: str, *arguments: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT, modules, *arguments], cwd=cwd, capture_output=True, text=True,
                          timeout=180, check=False)


@pytest.mark.parametrize("command", [["refresh", str(SAMPLE), "--db", "fleet.duckdb"], ["status", "--db", "fleet.duckdb"],
                                     ["backfill", "--failures", "--db", "fleet.duckdb"], ["lookup", "obd", "P0115"]])
def test_without_posix_file_locks_every_command_is_refused_in_one_line(tmp_path, command):
    done = fleet_without("fcntl", *command, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: fleet runs on Linux and macOS")
    assert "WSL" in done.stderr and "bug" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_without_posix_file_locks_json_gets_its_error_and_help_still_answers(tmp_path):
    done = fleet_without("fcntl", "refresh", str(SAMPLE), "--json", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr == ""
    error = json.loads(done.stdout)["error"]
    assert error["code"] == 2 and error["kind"] == "usage" and "Linux and macOS" in error["message"]
    helped = fleet_without("fcntl", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "refresh" in helped.stdout


@pytest.mark.parametrize(("hidden", "option", "extra"), [
    ("prefect_dask", ["--dask", "tcp://127.0.0.1:9"], "dask"),
    ("distributed", ["--dask", "tcp://127.0.0.1:9", "--dry-run"], "dask"),
    ("s3fs", ["--staging", "s3://bucket/fleet"], "s3"),
    ("botocore", ["--staging", "s3://bucket/fleet", "--dry-run"], "s3"),
])
def test_an_option_whose_extra_is_missing_is_refused_naming_the_extra(tmp_path, hidden, option, extra):
    done = fleet_without(hidden, "refresh", str(SAMPLE), "--db", "fleet.duckdb", *option, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert f"needs the `{extra}` extra" in done.stderr and f"pip install 'fleet-data[{extra}]'" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_local_staging_needs_no_extra(tmp_path):
    done = fleet_without("s3fs,botocore", "refresh", str(SAMPLE), "--db", "fleet.duckdb", "--staging",
                         "file:///nowhere/fleet", "--dry-run", "--json", cwd=tmp_path)
    assert "extra" not in done.stdout + done.stderr
