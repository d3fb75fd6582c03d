"""One configuration story: flag > environment (FLEET_*) > project file (fleet.toml or [tool.fleet]) > default.

Secrets live only in the environment or `.env`; the key alone reaches the real service (its public
base URL is the default); with no key at all, the embedded sandbox.
"""

from __future__ import annotations

import os

import pytest

from fleet_data.connectors import Settings
from fleet_data.connectors.config import DEFAULT_BASE_URL
from fleet_data.flows.cli import main, parse
from fleet_data.flows.defaults import DEFAULT_DB

VIN = "1HGCM82633A004352"


@pytest.fixture(autouse=True)
def clean(monkeypatch, tmp_path):
    for name in [n for n in os.environ if n.startswith(("FLEET_", "VDS_"))]:
        monkeypatch.delenv(name)
    project = tmp_path / "project"
    (project / "sub" / "deeper").mkdir(parents=True)
    monkeypatch.chdir(project / "sub" / "deeper")
    return project


def write(path, text: str) -> None:
    path.write_text(text)


def test_defaults_without_a_project_file(clean):
    args = parse(["refresh", "fleet.csv"])
    assert (args.db, args.concurrency, args.chunk_size, args.plates, args.recall_details) == (DEFAULT_DB, 32, 5000, True, "vin")
    assert args.fresh == {} and args.datasets[0] == "specs"


def test_flag_beats_environment_beats_file_beats_default(clean, monkeypatch):
    write(clean / "fleet.toml", 'concurrency = 7\nchunk_size = 70\nbatch_size = 700\ndb = "store/fleet.duckdb"\n'
                                'datasets = ["specs", "recalls"]\nplates = false\nrecall-details = "model"\n'
                                '[fresh]\nmarket_value = "14d"\nrecalls = "2d"\n')
    args = parse(["refresh", "fleet.csv"])  # found two folders up
    assert (args.concurrency, args.chunk_size, args.batch_size) == (7, 70, 700)
    assert args.datasets == ["specs", "recalls"] and args.plates is False and args.recall_details == "model"
    assert args.db == str(clean / "store" / "fleet.duckdb")  # relative to the file, not to where fleet runs
    assert args.fresh == {"market_value": "14d", "recalls": "2d"}

    monkeypatch.setenv("FLEET_CONCURRENCY", "9")
    monkeypatch.setenv("FLEET_DB", "here.duckdb")
    monkeypatch.setenv("FLEET_FRESH", "recalls=3d")
    args = parse(["refresh", "fleet.csv"])
    assert (args.concurrency, args.chunk_size, args.db) == (9, 70, "here.duckdb")
    assert args.fresh == {"market_value": "14d", "recalls": "3d"}  # per dataset, the nearer source wins

    args = parse(["refresh", "fleet.csv", "--concurrency", "11", "--db", "flag.duckdb", "--fresh", "recalls=4h",
                  "--plates"])
    assert (args.concurrency, args.chunk_size, args.db, args.plates) == (11, 70, "flag.duckdb", True)
    assert args.fresh == {"market_value": "14d", "recalls": "4h"}
    assert parse(["backfill", "--vins", VIN]).concurrency == 9
    assert parse(["status"]).db == "here.duckdb"


def test_tool_fleet_in_pyproject(clean):
    write(clean / "pyproject.toml", '[project]\nname = "x"\n[tool.fleet]\nchunk-size = 42\n')
    assert parse(["refresh", "fleet.csv"]).chunk_size == 42


def test_a_pyproject_without_tool_fleet_is_not_a_project_file(clean, tmp_path):
    write(tmp_path / "fleet.toml", "chunk_size = 8\n")  # above the project: still found
    write(clean / "pyproject.toml", '[project]\nname = "x"\n')
    assert parse(["refresh", "fleet.csv"]).chunk_size == 8


def test_the_nearest_file_wins(clean):
    write(clean / "fleet.toml", "chunk_size = 8\n")
    write(clean / "sub" / "fleet.toml", "chunk_size = 9\n")
    assert parse(["refresh", "fleet.csv"]).chunk_size == 9


def refused(capsys, *phrases: str) -> None:
    assert main(["refresh", "fleet.csv", "--lake", ""]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("error: "), err
    for phrase in phrases:
        assert phrase in err, err


def test_an_unknown_key_is_refused_with_the_file_and_key(clean, capsys):
    write(clean / "fleet.toml", "chunk_size = 8\nconcurrrency = 4\n")
    refused(capsys, str(clean / "fleet.toml"), "concurrrency", "did you mean concurrency")
    assert not any(clean.rglob("*.duckdb*"))


@pytest.mark.parametrize("key", ["api_key", "VDS_API_KEY", "key"])
def test_a_secret_in_the_project_file_is_refused(clean, capsys, key):
    write(clean / "fleet.toml", f'{key} = "sk_live_123"\n')
    refused(capsys, "fleet.toml", key, "VDS_API_KEY", ".env")


@pytest.mark.parametrize("text,phrase", [("concurrency = 'many'\n", "concurrency"), ("concurrency = 0\n", "concurrency"),
                                         ("[fresh]\nmarket_value = '2weeks'\n", "2weeks"),
                                         ("datasets = ['specs', 'mileage']\n", "mileage"),
                                         ("plates = 'yes'\n", "plates"), ("chunk_size = 8\n[[", "fleet.toml")])
def test_a_bad_value_in_the_project_file_is_refused(clean, capsys, text, phrase):
    write(clean / "fleet.toml", text)
    refused(capsys, "fleet.toml", phrase)


def test_a_bad_environment_value_is_refused(clean, capsys, monkeypatch):
    monkeypatch.setenv("FLEET_CHUNK_SIZE", "big")
    refused(capsys, "FLEET_CHUNK_SIZE")


def test_status_reads_its_database_from_the_project_file(clean, capsys):
    from fleet_data.tasks.store.database import open_database
    from fleet_data.tasks.store.published import publish_file as publish

    db = clean / "data" / "team.duckdb"
    db.parent.mkdir()
    with open_database(str(db)) as store:
        store.start_run("refresh", ["f.csv"], run_id="run-from-config")
        store.finish_run("run-from-config", "completed")
    publish(str(db))
    write(clean / "fleet.toml", 'db = "data/team.duckdb"\n')
    assert main(["status", "--json"]) == 0
    assert "run-from-config" in capsys.readouterr().out


# --- the service's settings ----------------------------------------------------------------------


def test_the_key_alone_reaches_the_public_service(clean, monkeypatch):
    monkeypatch.setenv("VDS_API_KEY", "k")
    settings = Settings.from_env(env_file=None)
    assert settings.base_url == DEFAULT_BASE_URL == "https://api.carsxe.com" and settings.configured


def test_the_key_from_dotenv_alone_reaches_the_public_service(clean):
    write(clean / "sub" / "deeper" / ".env", "VDS_API_KEY=from_dotenv\n")
    settings = Settings.from_env()
    assert (settings.api_key, settings.base_url) == ("from_dotenv", DEFAULT_BASE_URL)


def test_the_dotenv_beside_the_project_file_is_read_and_the_current_folders_wins(clean, monkeypatch):
    """Two folders below the `fleet.toml` in use (issue 26: its .env was read only from the current folder)."""
    from fleet_data.tasks.settings import client_settings, service_in_use, service_settings

    write(clean / "fleet.toml", 'db = "data/fleet.duckdb"\n')
    write(clean / ".env", "VDS_API_KEY=beside_the_project\nVDS_BASE_URL=http://127.0.0.1:9100\n")
    settings = client_settings()
    assert (settings.api_key, settings.base_url) == ("beside_the_project", "http://127.0.0.1:9100")
    assert service_in_use() == "http://127.0.0.1:9100" and service_settings().api_key == "beside_the_project"
    write(clean / "sub" / "deeper" / ".env", "VDS_API_KEY=here\n")  # nearer: wins, key by key
    assert (client_settings().api_key, client_settings().base_url) == ("here", "http://127.0.0.1:9100")
    monkeypatch.setenv("VDS_API_KEY", "from_the_environment")  # the environment beats both
    assert client_settings().api_key == "from_the_environment"


def test_no_key_and_no_url_means_the_sandbox(clean, capsys):
    from fleet_data.flows.target import service_settings

    with service_settings() as settings:
        assert settings.base_url.startswith("http://127.0.0.1:")
    assert "embedded sandbox" in capsys.readouterr().err


def test_a_key_alone_starts_no_sandbox(clean, monkeypatch, capsys):
    from fleet_data.flows.target import service_settings

    monkeypatch.setenv("VDS_API_KEY", "k")
    with service_settings() as settings:
        assert settings.base_url == DEFAULT_BASE_URL
    assert "sandbox" not in capsys.readouterr().err


def test_the_committed_example_uncommented_is_valid_and_the_defaults(clean):
    """The repository's fleet.toml documents the defaults: uncommented, it must load and change nothing."""
    from pathlib import Path

    from fleet_data.tasks.plan.due import DEFAULT_FRESHNESS, DEFAULT_NO_DATA_FRESHNESS, parse_freshness

    example = (Path(__file__).resolve().parents[2] / "fleet.toml").read_text()
    lines = [line[2:] if line.startswith("# ") and "=" in line.split("#")[1] or line.startswith("# [") else line
             for line in example.splitlines()]
    write(clean / "sub" / "deeper" / "fleet.toml", "\n".join(lines))
    import tomllib

    from fleet_data.tasks.settings import shared_options

    assert set(tomllib.loads("\n".join(lines))) == set(shared_options())  # every setting is shown, uncommented here
    args = parse(["refresh", "f.csv"])
    os.remove(clean / "sub" / "deeper" / "fleet.toml")
    defaults = parse(["refresh", "f.csv"])
    fresh = args.fresh
    assert fresh and parse_freshness(fresh) == {**DEFAULT_FRESHNESS, "no_data": DEFAULT_NO_DATA_FRESHNESS}
    args.fresh = defaults.fresh = None
    assert vars(args) == vars(defaults)


def test_the_retry_window_from_flag_environment_file_or_default(clean, monkeypatch, capsys):
    """Seconds, or a number with s, m or h; "off" keeps retrying until each call's budget is spent."""
    assert parse(["refresh", "fleet.csv"]).retry_window == 180.0
    write(clean / "fleet.toml", 'retry_window = "90s"\n')
    assert parse(["refresh", "fleet.csv"]).retry_window == 90.0
    monkeypatch.setenv("FLEET_RETRY_WINDOW", "2m")
    assert parse(["refresh", "fleet.csv"]).retry_window == 120.0
    assert parse(["refresh", "fleet.csv", "--retry-window", "45"]).retry_window == 45.0
    assert parse(["refresh", "fleet.csv", "--retry-window", "off"]).retry_window is None  # no bound
    monkeypatch.delenv("FLEET_RETRY_WINDOW")
    write(clean / "fleet.toml", "retry_window = 'soon'\n")
    refused(capsys, "fleet.toml", "retry_window", "'soon'", "3m")


@pytest.mark.parametrize("name,value", [("FLEET_PUBLISH_SECONDS", "nan"), ("FLEET_PUBLISH_SECONDS", "-5"),
                                        ("FLEET_PUBLISH_SECONDS", "soon"), ("VDS_TIMEOUT", "nan"),
                                        ("VDS_MAX_RETRY_AFTER", "inf")])
def test_a_setting_that_is_not_a_finite_number_in_range_is_refused_before_anything_starts(clean, capsys, monkeypatch,
                                                                                          name, value):
    monkeypatch.setenv(name, value)
    refused(capsys, name)
    assert not any(clean.rglob("*.duckdb*"))


@pytest.mark.parametrize("flag,value", [("--value-move", "inf"), ("--value-move", "nan"), ("--value-move", "0")])
def test_a_value_move_must_be_a_finite_percentage_above_0(clean, capsys, flag, value):
    assert main(["refresh", "fleet.csv", "--lake", "", flag, value]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {flag} ") and len(err.splitlines()) == 1, err
