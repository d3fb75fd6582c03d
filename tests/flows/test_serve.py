"""`fleet serve` builds two scheduled deployments of the refresh flow; `prefect.yaml` describes the same
two schedules for a work pool, under names of their own. Nothing is served here (tests/flows/test_serve_and_worker.py
serves them against a real server)."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest
import yaml
from prefect import Flow
from prefect.flows import load_flow_from_entrypoint

from fleet_data.flows.cli import build_parser
from fleet_data.flows.serve import RECALLS_CRON, VALUES_CRON, build_deployments
from fleet_data.tasks.settings import RefreshOptions

ROOT = Path(__file__).resolve().parents[2]


def _schedule(deployment) -> tuple[str, str]:
    (only,) = deployment.schedules
    return only.schedule.cron, only.schedule.timezone


def test_weekly_recalls_and_monthly_values_with_their_parameters(tmp_path):
    fleet = tmp_path / "fleet.csv"
    recalls, values = build_deployments(str(fleet), str(tmp_path / "fleet.duckdb"), str(tmp_path / "lake"))
    # Not prefect.yaml's names: serving those would take the worker's deployments over.
    assert (recalls.name, _schedule(recalls)) == ("served-weekly-recalls", ("0 6 * * 1", "UTC"))
    assert (values.name, _schedule(values)) == ("served-monthly-values", ("0 6 1 * *", "UTC"))
    assert recalls.parameters == {"paths": [str(fleet)], "options": {
        "db": str(tmp_path / "fleet.duckdb"), "lake": str(tmp_path / "lake"), "datasets": ["recalls"],
        "fresh": {"recalls": "151h"}}}  # 90% of a week: each run re-checks
    assert values.parameters["options"]["datasets"] == ["specs", "market_value", "history", "lien_theft"]
    # The module, wherever `fleet serve` was started: no checkout path.
    assert recalls.entrypoint == values.entrypoint == "fleet_data.flows.refresh.refresh_fleet"
    assert not any("key" in name.lower() for d in (recalls, values) for name in [*d.parameters, *d.parameters["options"]])


def test_options_change_schedules_datasets_and_make_paths_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recalls, values = build_deployments("fleet.csv", "out/fleet.duckdb", None, recalls_cron="30 5 * * 2",
                                        values_cron="0 4 15 * *", value_datasets=["market_value"],
                                        timezone="Europe/Paris")
    assert _schedule(recalls) == ("30 5 * * 2", "Europe/Paris")
    assert _schedule(values) == ("0 4 15 * *", "Europe/Paris")
    assert values.parameters == {"paths": [str(tmp_path / "fleet.csv")], "options": {
        "db": str(tmp_path / "out" / "fleet.duckdb"), "lake": None, "datasets": ["market_value"],
        "fresh": {"market_value": "604h"}}}  # 90% of February
    with pytest.raises(ValueError, match="unknown dataset"):
        build_deployments("fleet.csv", value_datasets=["prices"])
    with pytest.raises(ValueError, match="cron"):
        build_deployments("fleet.csv", recalls_cron="every monday")
    assert [d.name for d in build_deployments("fleet.csv", name="trucks")] == ["trucks-weekly-recalls",
                                                                              "trucks-monthly-values"]


def test_cli_refuses_a_missing_fleet_file_before_serving(tmp_path, capsys):
    args = build_parser().parse_args(["serve", str(tmp_path / "missing.csv")])
    assert args.recalls_cron == RECALLS_CRON and args.values_cron == VALUES_CRON
    assert args.run(args) == 2
    assert "no such file" in capsys.readouterr().err


def test_prefect_yaml_describes_the_same_deployments_under_other_names():
    config = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    built = {d.name.removeprefix("served-"): d for d in build_deployments("data/sample_fleet.csv")}
    described = {d["name"]: d for d in config["deployments"]}
    assert described.keys() == built.keys()
    for name, deployment in described.items():
        assert [(s["cron"], s["timezone"]) for s in deployment["schedules"]] == [_schedule(built[name])]
        assert deployment["parameters"]["options"]["datasets"] == built[name].parameters["options"]["datasets"]
        assert deployment["parameters"]["options"]["fresh"] == built[name].parameters["options"]["fresh"]
        assert deployment["entrypoint"] == built[name].entrypoint


def test_prefect_yaml_entrypoint_imports_and_takes_its_parameters():
    config = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    for deployment in config["deployments"]:
        # A module path (no colon, no file): Prefect imports it, and never looks for code at the deployment's path.
        assert ":" not in deployment["entrypoint"]
        flow = load_flow_from_entrypoint(deployment["entrypoint"])
        assert isinstance(flow, Flow) and flow.name == "fleet-refresh"
        inspect.signature(flow.fn).bind(**deployment["parameters"])  # every parameter is one the flow takes
        RefreshOptions.model_validate(deployment["parameters"]["options"])  # and its options are valid ones
        assert (ROOT / deployment["parameters"]["paths"][0]).is_file()


def test_scheduled_windows_are_shorter_than_the_gap_between_runs():
    from fleet_data.flows.serve import scheduled_freshness

    assert scheduled_freshness("0 6 * * *", "UTC", ["recalls", "specs"]) == {"recalls": "21h"}  # daily
    monthly = scheduled_freshness(VALUES_CRON, "UTC", ["specs", "market_value", "history"])
    assert monthly == {"market_value": "604h", "history": "604h"}  # specs keep their year


@pytest.mark.usefixtures("prefect_server")
def test_serve_refuses_a_base_url_with_no_key_anywhere(fleet_file, tmp_path, monkeypatch, capsys):
    from fleet_data.flows.cli import parse

    for name in ("PREFECT_LOGGING_LEVEL", "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"):  # run_serve sets them
        monkeypatch.setenv(name, os.environ.get(name, "WARNING"))
    monkeypatch.delenv("VDS_API_KEY", raising=False)
    monkeypatch.setenv("VDS_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setattr("fleet_data.flows.apikey.SECRET_BLOCK", "no-such-key-block")
    args = parse(["serve", fleet_file(3), "--db", str(tmp_path / "fleet.duckdb")])
    assert args.run(args) == 2  # a Secret block would do (tests/flows/test_serve_and_worker.py); there is none
    assert "VDS_BASE_URL is set but there is no key" in capsys.readouterr().err


@pytest.mark.usefixtures("prefect_server", "service")
def test_serve_refuses_to_take_over_a_deployment_of_a_work_pool(fleet_file, tmp_path, monkeypatch, capsys):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate

    from fleet_data.flows.cli import parse
    from fleet_data.flows.refresh import refresh_fleet

    for name in ("PREFECT_LOGGING_LEVEL", "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"):  # run_serve sets them
        monkeypatch.setenv(name, os.environ.get(name, "WARNING"))
    with get_client(sync_client=True) as client:  # as `prefect deploy` leaves it: a deployment on a pool
        client.create_work_pool(WorkPoolCreate(name="taken-pool", type="process"), overwrite=True)
        client.create_deployment(flow_id=client.create_flow(refresh_fleet), name="taken-weekly-recalls",
                                 work_pool_name="taken-pool", entrypoint="fleet_data.flows.refresh.refresh_fleet")
    args = parse(["serve", fleet_file(3), "--db", str(tmp_path / "fleet.duckdb"), "--name", "taken"])
    assert args.run(args) == 2  # refused before serving anything
    assert "fleet-refresh/taken-weekly-recalls runs on work pool 'taken-pool'" in capsys.readouterr().err
