"""Where the data came from, end to end: every `fleet` a process of its own, as a user runs it.

Two services: the embedded sandbox (no key set) and a standing `fleet sandbox --port` (VDS_BASE_URL and a key, in
the environment or in the `.env` beside `fleet.toml`). A skewed clock: the real `faketime` (libfaketime, Debian's
`faketime`) moves every clock the command reads at once (Python's, DuckDB's `now()`, the libraries'), which an
injectable clock cannot promise: one read left out would pass unseen. One standing Prefect server serves every
run (on the real clock, as a shared server would).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from fleet_data.connectors.sandbox.runner import Sandbox
from tests.flows.conftest import sample_rows
from tests.prefect_server import prefect_server, stop_group

ROOT = Path(__file__).resolve().parents[2]
FAKETIME = shutil.which("faketime")
# Skipped, saying why, where faketime is not installed; CI (.ci/run) installs it and requires it.
needs_faketime = pytest.mark.skipif(FAKETIME is None and not os.environ.get("FLEET_REQUIRE_FAKETIME"),
                                    reason="Debian's faketime is not installed (apt-get install faketime; .ci/run does it)")
KEY = "sandbox_demo_key"  # the standard plan, as the embedded sandbox's
DATASETS = "specs,market_value"
VINS = 5
pytestmark = pytest.mark.timeout(1500)


@pytest.fixture(scope="module")
def prefect() -> Iterator[dict[str, str]]:
    with prefect_server() as env:
        yield env


@pytest.fixture(scope="module")
def standing() -> Iterator[Sandbox]:
    """`fleet sandbox --port` in a process of its own: another service than the embedded sandbox."""
    process = subprocess.Popen([sys.executable, "-m", "fleet_data.flows.cli", "sandbox", "--port", "0"], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True, start_new_session=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = process.stdout.readline() if process.stdout else ""
        url = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert url, f"the sandbox said {line!r}"
        yield Sandbox(url.group(0))
    finally:
        stop_group(process)


def fleet(prefect: dict[str, str], *argv: str, cwd: Path, service: Sandbox | None = None,
          clock: str | None = None) -> subprocess.CompletedProcess:
    """`fleet argv...` in `cwd`: with `service`'s URL and key in its environment, else none (the embedded sandbox,
    unless a `.env` says otherwise); under `faketime clock` when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VDS_", "PREFECT_", "FLEET_"))}
    env |= {**prefect, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    if service is not None:
        env |= {"VDS_BASE_URL": service.url, "VDS_API_KEY": KEY}
    command = [sys.executable, "-m", "fleet_data.flows.cli", *argv]
    if clock:
        assert FAKETIME, "faketime is not installed (apt-get install faketime)"
        command = [FAKETIME, "-f", clock, *command]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


def summary(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode in (0, 3), done.stderr[-3000:]
    return json.loads(done.stdout)


def files_of(folder: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def sql(db: Path, query: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        return con.execute(query).fetchall()


def banner(report: Path) -> str:
    found = re.search(r'<div class="service-banner (\w+)" id="service-banner"[^>]*>([^<]*)</div>', report.read_text())
    assert found, "the report has no service banner"
    return f"{found.group(1)}: {found.group(2)}"


def test_each_service_is_recorded_and_the_embedded_sandbox_never_lands_among_another(prefect, standing, tmp_path):
    project = tmp_path / "project"
    (project / "sub" / "deeper").mkdir(parents=True)
    (project / "fleet.toml").write_text(f'db = "data/fleet.duckdb"\nlake = "data/lake"\ndatasets = "{DATASETS}"\n')
    sample_rows(VINS).write_csv(project / "fleet.csv")
    db, report = project / "data" / "fleet.duckdb", project / "data" / "lake" / "report.html"

    # 1. No key anywhere: the embedded sandbox, said so, recorded so, and the report says its answers are made up.
    first = fleet(prefect, "refresh", "fleet.csv", "--json", cwd=project)
    assert summary(first)["service"] == "embedded sandbox" and "using the embedded sandbox" in first.stderr
    assert sql(db, "SELECT DISTINCT service FROM runs UNION SELECT DISTINCT service FROM fetch_status") == [
        ("embedded sandbox",)]
    assert banner(report).startswith("alert: Made-up data: all 10 answers on this page came from the embedded sandbox")

    # 2. The standing sandbox, another service: none of the embedded sandbox's answers is fresh for it, and the
    # plan says why it asks again.
    planned = fleet(prefect, "refresh", "fleet.csv", "--dry-run", cwd=project, service=standing)
    assert planned.returncode == 0, planned.stderr
    assert f"Plan: 10 units from {standing.url}" in planned.stderr
    assert f"another service: 10 answers from embedded sandbox are never fresh for {standing.url}" in planned.stderr
    second = summary(fleet(prefect, "refresh", "fleet.csv", "--json", cwd=project, service=standing))
    assert second["service"] == standing.url and second["calls"] == 10 + 1  # and the free key check
    assert {d["other_service"] for d in second["datasets"].values()} == {VINS}
    assert sql(db, "SELECT DISTINCT service FROM fetch_status") == [(standing.url,)]
    # The same request the same day: the newer answer replaced the made-up one in the valuations' history.
    assert sql(db, "SELECT service, count(*) FROM market_values GROUP BY ALL") == [(standing.url, VINS)]
    assert banner(report) == f"info: Data from {standing.url} (10 answers)."

    # 3. No key again: refused before anything starts (no sandbox, no Prefect), one line, exit 2, nothing written.
    before = files_of(project / "data")
    for argv in (["refresh", "fleet.csv"], ["refresh", "fleet.csv", "--dry-run"]):
        refused = fleet(prefect, *argv, cwd=project)
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr.count("\n") == 1 and refused.stderr.startswith(f"error: data/fleet.duckdb holds answers "
                                                                               f"from {standing.url}"), refused.stderr
        assert "embedded sandbox at" not in refused.stderr and "Prefect" not in refused.stderr
    assert files_of(project / "data") == before  # not even a run row

    # 4. The key in the .env beside fleet.toml, run from two folders below: found, the standing sandbox called.
    (project / ".env").write_text(f"VDS_BASE_URL={standing.url}\nVDS_API_KEY={KEY}\n")
    third = summary(fleet(prefect, "refresh", "../../fleet.csv", "--json", cwd=project / "sub" / "deeper"))
    assert third["service"] == standing.url and third["status"] == "completed" and third["calls"] == 0  # all fresh
    status = json.loads(fleet(prefect, "status", "--json", cwd=project / "sub" / "deeper").stdout)
    assert [(r["service"], r["answers"]) for r in status["services"]] == [(standing.url, 2 * VINS)]
    assert [r["service"] for r in status["runs"]] == [standing.url, standing.url, "embedded sandbox"]


@needs_faketime
def test_a_clock_ahead_or_behind_never_freezes_hides_or_loses_anything(prefect, standing, tmp_path):
    sample_rows(VINS).write_csv(tmp_path / "fleet.csv")
    db = tmp_path / "fleet.duckdb"
    run = ("refresh", "fleet.csv", "--db", str(db), "--lake", "", "--datasets", DATASETS, "--json")
    vin = sample_rows(1)["vin"][0]

    # 1. A clock 400 days ahead: its answers are dated 400 days ahead.
    ahead = summary(fleet(prefect, *run, cwd=tmp_path, service=standing, clock="+400d"))
    assert ahead["status"] == "completed" and ahead["units"] == 2 * VINS
    assert sql(db, "SELECT min(fetched_at) > now() + INTERVAL 399 DAY FROM fetch_status") == [(True,)]

    # 2. Back on the real clock: refused, one line, exit 2, nothing written.
    before = files_of(tmp_path)
    refused = fleet(prefect, *run[:-1], cwd=tmp_path, service=standing)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "behind the last run" in refused.stderr and "--allow-clock-behind" in refused.stderr
    assert files_of(tmp_path) == before

    # 3. Said right: the answers dated in the future are not fresh (they would be for 400 days more); the plan says
    # so, and asks for every one again.
    dry = fleet(prefect, *run[:-1], "--dry-run", "--allow-clock-behind", cwd=tmp_path, service=standing)
    assert dry.returncode == 0 and f"Plan: {2 * VINS} units" in dry.stderr, dry.stderr
    assert f"dated in the future: {2 * VINS} answers dated more than 5 minutes ahead of this clock" in dry.stderr

    # 4. A clock six years behind, said right: its new answers are the latest, whatever their dates, and what they
    # changed is recorded (compared with the answers of the run before, dated 2028).
    standing.set_vehicle(vin, value_factor=0.5, specs={"trim": "Clock Behind Trim"})
    behind = summary(fleet(prefect, *run, "--force", "--allow-clock-behind", cwd=tmp_path, service=standing,
                           clock="@2020-06-01 12:00:00"))
    assert behind["status"] == "completed" and behind["changes"]["by_kind"] == {"value_move": 1, "decode_changed": 1}
    assert sql(db, f"SELECT trim, valued_on < DATE '2021-01-01' FROM vehicle_overview WHERE vin = '{vin}'") == [
        ("Clock Behind Trim", True)]
    assert sql(db, "SELECT run_id FROM changes_latest_run LIMIT 1") == [(behind["run_id"],)]

    # 5. `fleet status` counts the units every run paid this month, whatever its clock said.
    standing.clear_vehicles()
    status = json.loads(fleet(prefect, "status", "--db", str(db), "--json", cwd=tmp_path).stdout)
    assert status["units_this_month_total"] == 2 * 2 * VINS == sum(r["units"] for r in status["runs"])
    assert [r["run_id"] for r in status["runs_with_clock_behind"]] == [behind["run_id"]]
    # Each run's own times stay as its clock said (what was true of that machine), beside the order they came in.
    assert sql(db, "SELECT run_seq, year(started_at) FROM runs ORDER BY run_seq") == [
        (1, (datetime.now(UTC) + timedelta(days=400)).year), (2, 2020)]
