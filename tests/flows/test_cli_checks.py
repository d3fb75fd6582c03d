"""Check first: a command the CLI can tell is wrong is refused before anything starts.

No database, lock, staging folder or lake is created, neither the sandbox nor Prefect starts, and the
refusal is one line (what, why, what to do) with exit code 2; with `--json`, one JSON object instead.
None of these tests needs a Prefect server: a refusal that got as far as starting one would hang or fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet_data.flows.cli import main

ROOT = Path(__file__).resolve().parents[2]
VIN = "1HGCM82633A004352"


@pytest.fixture(autouse=True)
def no_service(monkeypatch, tmp_path):
    # Without a key the CLI would start the embedded sandbox; a refused command must not get that far.
    for name in ("VDS_API_KEY", "VDS_BASE_URL", "VDS_TIMEOUT", "VDS_MAX_RETRIES"):
        monkeypatch.delenv(name, raising=False)
    for name in [n for n in os.environ if n.startswith("FLEET_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no fleet.toml or .env of the checkout's, and default paths land here


@pytest.fixture
def fleet(tmp_path) -> str:
    path = tmp_path / "fleet.csv"
    path.write_text(f"vin,unit\n{VIN},1\n")
    return str(path)


def files_under(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def refused(argv: list[str], root: Path, capsys, *phrases: str) -> str:
    """Run `fleet argv`: exit 2, one line on stderr, nothing on stdout, nothing new under `root`."""
    before = files_under(root)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert out == "" and "Traceback" not in err
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    assert files_under(root) == before, "a refused command wrote something"
    return lines[0]


# --- refresh --------------------------------------------------------------------------------------


def test_a_freshness_the_grammar_refuses_is_refused_first(fleet, tmp_path, capsys):
    line = refused(["refresh", fleet, "--db", str(tmp_path / "out" / "fleet.duckdb"), "--lake", "",
                    "--fresh", "market_value=2weeks"], tmp_path, capsys, "--fresh", "2weeks", "30d")
    assert "sandbox" not in line


@pytest.mark.parametrize("fresh,phrase", [("mileage=3d", "unknown dataset 'mileage'"),
                                          ("market_value", "DATASET=AGE"),
                                          ("market_value=", "use a number of seconds, or one with s, m, h or d")])
def test_other_freshness_mistakes(fresh, phrase, fleet, tmp_path, capsys):
    refused(["refresh", fleet, "--db", str(tmp_path / "fleet.duckdb"), "--lake", "", "--fresh", fresh],
            tmp_path, capsys, phrase)


@pytest.mark.parametrize("flag,value", [("--concurrency", "0"), ("--chunk-size", "-5"), ("--max-units", "-1"),
                                        ("--concurrency", "lots")])
def test_counts_must_be_positive_numbers(flag, value, fleet, tmp_path, capsys):
    argv = ["refresh", fleet, "--db", str(tmp_path / "fleet.duckdb"), "--lake", "", flag, value]
    if value == "lots":  # not a number at all: argparse's own refusal, with the subcommand's usage
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2 and "usage: fleet refresh" in capsys.readouterr().err
        return
    refused(argv, tmp_path, capsys, flag, value)


@pytest.mark.parametrize("value", ["-5", "soon", "3 days"])
def test_a_retry_window_must_be_a_duration(value, fleet, tmp_path, capsys):
    refused(["refresh", fleet, "--db", str(tmp_path / "fleet.duckdb"), "--lake", "", "--retry-window", value],
            tmp_path, capsys, "--retry-window", value, "3m")


def test_a_lake_that_is_a_file_is_refused(fleet, tmp_path, capsys):
    lake = tmp_path / "lake"
    lake.write_text("not a folder")
    refused(["refresh", fleet, "--db", str(tmp_path / "db" / "fleet.duckdb"), "--lake", str(lake)], tmp_path, capsys,
            "--lake", str(lake), "not a folder")


def test_a_lake_under_a_file_is_refused(fleet, tmp_path, capsys):
    refused(["refresh", fleet, "--db", str(tmp_path / "fleet.duckdb"), "--lake", str(Path(fleet) / "lake")],
            tmp_path, capsys, "--lake")


def test_a_db_that_is_a_folder_is_refused(fleet, tmp_path, capsys):
    folder = tmp_path / "a_folder"
    folder.mkdir()
    refused(["refresh", fleet, "--db", str(folder), "--lake", ""], tmp_path, capsys, "--db", "is a folder")


def test_a_db_whose_parent_is_a_file_is_refused(fleet, tmp_path, capsys):
    refused(["refresh", fleet, "--db", str(Path(fleet) / "fleet.duckdb"), "--lake", ""], tmp_path, capsys,
            "--db", "fleet.csv", "not a folder")


def test_a_staging_path_taken_by_a_file_is_refused(fleet, tmp_path, capsys):
    (tmp_path / "staging").write_text("in the way")
    refused(["refresh", fleet, "--db", str(tmp_path / "fleet.duckdb"), "--lake", ""], tmp_path, capsys,
            "staging", "not a folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_a_db_in_a_read_only_folder_is_refused(fleet, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    refused(["refresh", fleet, "--db", str(locked / "fleet.duckdb"), "--lake", ""], tmp_path, capsys, "not writable")


@pytest.mark.parametrize("listen,phrase", [("localhost:abc", "'abc'"), ("localhost:70000", "1 to 65535"),
                                           ("localhost", "HOST:PORT"), ("localhost:0", "1 to 65535")])
def test_a_webhook_listen_address_that_cannot_work_is_refused(listen, phrase, fleet, tmp_path, capsys):
    refused(["refresh", fleet, "--db", str(tmp_path / "fleet.duckdb"), "--lake", "", "--webhook-listen", listen],
            tmp_path, capsys, "--webhook-listen", phrase)


def test_a_webhook_listen_port_already_taken_is_refused(fleet, tmp_path, capsys):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused(["refresh", fleet, "--db", str(tmp_path / "fleet.duckdb"), "--lake", "",
                 "--webhook-listen", f"127.0.0.1:{port}"], tmp_path, capsys, "--webhook-listen", "cannot listen")


@pytest.mark.parametrize("url", ["http://hooks.example.com/done", "hooks.example.com/done", "https://"])
def test_a_webhook_url_must_be_https(url, fleet, tmp_path, capsys):
    refused(["refresh", fleet, "--db", str(tmp_path / "fleet.duckdb"), "--lake", "", "--webhook-url", url],
            tmp_path, capsys, "--webhook-url", "https")


@pytest.mark.parametrize("env,phrase", [
    ({"VDS_API_KEY": "k", "VDS_BASE_URL": "api.carsxe.com"}, "VDS_BASE_URL"),
    ({"VDS_API_KEY": "k", "VDS_BASE_URL": "ftp://api.carsxe.com"}, "http(s) URL"),
    ({"VDS_BASE_URL": "https://api.carsxe.com"}, "VDS_API_KEY"),
    ({"VDS_API_KEY": "k", "VDS_TIMEOUT": "soon"}, "VDS_TIMEOUT"),
    ({"VDS_API_KEY": "k", "VDS_MAX_RETRIES": "many"}, "VDS_MAX_RETRIES"),
])
def test_settings_that_cannot_work_are_refused_before_a_call(env, phrase, fleet, tmp_path, capsys, monkeypatch):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    refused(["refresh", fleet, "--db", str(tmp_path / "fleet.duckdb"), "--lake", ""], tmp_path, capsys, phrase)


def test_an_unbalanced_quote_in_the_header_is_named_with_its_place(tmp_path, capsys):
    bad = tmp_path / "injected.csv"
    bad.write_text(f'vin"; DROP TABLE vehicles; --,unit\n{VIN},1\n1FTFW1ET5DFC10312,2\n')
    line = refused(["refresh", str(bad), "--db", str(tmp_path / "fleet.duckdb"), "--lake", ""], tmp_path, capsys,
                   str(bad), "quote", "line 1, column 4", "never closed")
    assert "no data rows" not in line


def test_an_unbalanced_quote_further_down_is_named_too(tmp_path):
    from fleet_data.tasks.ingest.fleet_files import FleetFileError, read_fleet

    bad = tmp_path / "late.csv"
    bad.write_text(f'\nvin,"unit\n{VIN},1\n')
    with pytest.raises(FleetFileError, match=r"line 2, column 5"):
        read_fleet([str(bad)])


# --- backfill, status -----------------------------------------------------------------------------


def test_backfill_checks_its_counts_and_paths_first(fleet, tmp_path, capsys):
    db = str(tmp_path / "fleet.duckdb")
    refused(["backfill", "--vins", VIN, "--db", db, "--lake", "", "--concurrency", "0"], tmp_path, capsys,
            "--concurrency")
    refused(["backfill", "--vins", VIN, "--db", db, "--lake", str(Path(fleet) / "x"), "--chunk-size", "5"],
            tmp_path, capsys, "--lake")
    refused(["backfill", "--vins-file", str(tmp_path / "missing.txt"), "--db", db, "--lake", ""], tmp_path, capsys,
            "--vins-file", "missing.txt")
    refused(["backfill", "--vins", VIN, "--db", str(tmp_path), "--lake", ""], tmp_path, capsys, "--db", "is a folder")


def test_backfill_refuses_invalid_vins_before_creating_a_database(tmp_path, capsys):
    # No database yet, so no roster: a VIN is accepted only if it is valid, which needs no lock to find out.
    refused(["backfill", "--vins", f"{VIN},ABC", "--db", str(tmp_path / "fleet.duckdb"), "--lake", ""], tmp_path,
            capsys, "ABC (wrong_length)")


def test_backfill_refuses_a_base_url_without_a_key(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("VDS_BASE_URL", "https://api.carsxe.com")
    refused(["backfill", "--vins", VIN, "--db", str(tmp_path / "fleet.duckdb"), "--lake", ""], tmp_path, capsys,
            "VDS_API_KEY")


def test_status_checks_its_arguments(tmp_path, capsys):
    refused(["status", "--db", str(tmp_path / "fleet.duckdb"), "--runs", "0"], tmp_path, capsys, "--runs")


# --- --json, -v, typos, --version, broken pipes ---------------------------------------------------


def test_with_json_a_usage_error_is_json_on_stdout(fleet, tmp_path, capsys):
    before = files_under(tmp_path)
    code = main(["refresh", fleet, "--db", str(tmp_path / "fleet.duckdb"), "--json", "--fresh", "market_value=2weeks"])
    out, err = capsys.readouterr()
    assert code == 2 and err == ""
    assert out.count("\n") == 1
    error = json.loads(out)["error"]
    assert error["code"] == 2 and error["kind"] == "usage" and "2weeks" in error["message"]
    assert files_under(tmp_path) == before


def test_with_json_an_argparse_error_is_json_too(fleet, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["refresh", fleet, "--json", "--datsets", "specs"])
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and err == ""
    error = json.loads(out)["error"]
    assert error["kind"] == "usage" and "--datsets" in error["message"] and "--datasets" in error["message"]


def test_with_json_a_bug_is_json_too(fleet, tmp_path, capsys, monkeypatch):
    import fleet_data.tasks.ingest.fleet_files

    def broken(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(fleet_data.tasks.ingest.fleet_files, "read_fleet", broken)
    assert main(["refresh", fleet, "--db", str(tmp_path / "fleet.duckdb"), "--json"]) == 1
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert error["code"] == 1 and error["kind"] == "bug" and "boom second line" in error["message"]
    assert err == ""


HOLDER = """
import sys, time
from fleet_data.tasks.run.context import hold_run
session = hold_run(sys.argv[1], "run-holding", "refresh")
print("holding", flush=True)
time.sleep(120)
"""


def test_with_json_a_busy_database_is_json(fleet, tmp_path, capsys):
    db = str(tmp_path / "fleet.duckdb")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, db], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "holding"
        code = main(["refresh", fleet, "--db", db, "--lake", "", "--json"])
    finally:
        holder.kill()
        holder.wait(timeout=30)
    out, err = capsys.readouterr()
    assert code == 75 and err == ""
    error = json.loads(out)["error"]
    assert error["code"] == 75 and error["kind"] == "busy" and "run-holding" in error["message"]


def test_verbose_after_the_command(tmp_path, capsys):
    from fleet_data.flows.cli import parse

    assert parse(["status", "-v"]).verbose and parse(["-v", "status"]).verbose and not parse(["status"]).verbose
    assert parse(["lookup", "obd", "P0115", "--verbose"]).verbose
    # Accepted, not refused: the command runs and says what is wrong with its database.
    assert main(["status", "--db", str(tmp_path / "nowhere.duckdb"), "-v"]) == 2
    assert "no such database" in capsys.readouterr().err


def test_a_typo_shows_the_subcommands_usage_and_a_suggestion(fleet, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["refresh", fleet, "--datsets", "specs"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert "usage: fleet refresh" in err and "did you mean --datasets?" in err
    assert "COMMAND" not in err  # not the top-level usage


def test_a_typo_in_a_lookup_shows_the_lookups_usage(capsys):
    with pytest.raises(SystemExit):
        main(["lookup", "obd", "P0115", "--jsno"])
    err = capsys.readouterr().err
    assert "usage: fleet lookup obd" in err and "did you mean --json?" in err


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"fleet {version('fleet-data')}"


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    """`fleet status | head -1`: the reader closes the pipe before the command has printed everything."""
    from fleet_data.tasks.store.database import open_database
    from fleet_data.tasks.store.published import publish_file as publish

    db = str(tmp_path / "fleet.duckdb")
    with open_database(db) as store:
        for i in range(300):  # enough lines that the output outgrows a pipe's buffer
            store.start_run("refresh", ["fleet.csv"], run_id=f"run-{i:03d}")
            store.finish_run(f"run-{i:03d}", "completed")
    publish(db)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400"}
    for command in (["status", "--db", db, "--runs", "300"], ["status", "--db", db, "--json", "--runs", "300"]):
        shell = subprocess.run(
            ["sh", "-c", f'"{sys.executable}" -m flows.cli "$@" | head -1', "sh", *command],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert shell.stdout.count("\n") == 1
        assert "Traceback" not in shell.stderr and "BrokenPipe" not in shell.stderr, shell.stderr
        assert shell.stderr == ""
        # And deterministically: the pipe is closed before the command writes a byte.
        process = subprocess.Popen([sys.executable, "-m", "fleet_data.flows.cli", *command], cwd=tmp_path, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        process.stdout.close()
        err = process.stderr.read().decode()
        assert process.wait(timeout=120) in (0, 141)
        assert err == "", err
