"""One declaration per dataset (tasks/datasets.py): everything that names datasets derives from the registry.

A toy dataset, declared in the test only (the legacy `/marketvalue` endpoint, which the sandbox serves,
landed into a table of its own with SQL files of its own), is planned, fetched over a real socket, landed,
re-parsed and accepted by the CLI's checks without any other edit.
"""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from fleet_data.tasks import datasets as registry
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.datasets import REGISTRY, Dataset, Table

ROOT = Path(__file__).resolve().parents[2]
VINS = ["1HGCM82633A004352", "1HGCM82633A004353", "WBA3A5C50DF123456"]


def test_every_consumer_names_the_registrys_datasets():
    from fleet_data.flows import backfill as backfill_flow
    from fleet_data.flows import serve
    from fleet_data.tasks.steps import backfill_tasks as backfill
    from fleet_data.tasks.fetch import enrich
    from fleet_data.tasks.land import landing
    from fleet_data.tasks.plan import due as plan
    from fleet_data.tasks.land import shred
    from fleet_data.tasks.store import database as storage

    names = tuple(REGISTRY)
    assert tuple(plan.ALL_DATASETS) == names
    assert set(plan.DEFAULT_DATASETS) == {n for n, d in REGISTRY.items() if d.default}
    assert dict(plan.DEFAULT_FRESHNESS) == {n: d.freshness for n, d in REGISTRY.items()}
    assert set(backfill.MODELS) == set(names) == set(backfill_flow.REPARSE_DATASETS)
    assert set(enrich.DATASETS) == {d.fetched_as for d in REGISTRY.values()} == set(shred.TABLES)
    assert set(serve.RECALL_DATASETS) | set(serve.VALUE_DATASETS) <= set(names)
    for d in REGISTRY.values():
        assert shred.TABLES[d.fetched_as] == tuple(t.name for t in d.tables)
        for t in d.tables:
            assert storage.LANDING_TABLES[t.name] == (d.name if t.resolves_failures else None)
            assert t.shred.is_file() and t.landing.is_file()
        if d.fetched_as != d.name:
            assert landing.FAILURE_DATASET[d.fetched_as] == d.name


def test_each_tables_landing_sql_upserts_by_its_declared_key():
    """A MERGE's ON clause, or the PARTITION BY of a replace-and-insert, names exactly the declared key."""
    for d in REGISTRY.values():
        for t in d.tables:
            sql = "\n".join(line for line in t.landing.read_text(encoding="utf-8").splitlines()
                            if not line.lstrip().startswith("--"))
            merge = re.search(r"^ON (.*?)^WHEN", sql, flags=re.M | re.S)
            if merge:
                key = re.findall(r"t\.(\w+) (?:=|IS NOT DISTINCT FROM) s\.\1", merge.group(1))
            else:
                key = re.findall(r"i\.(\w+)", re.findall(r"PARTITION BY ([^)]*?) ORDER", sql)[-1])
            assert set(key) == set(t.key), (t.name, key)


def test_the_readme_shows_the_registrys_table():
    readme = [line.strip() for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()]
    table = registry.docs_table().splitlines()
    assert len(table) == 2 + len(REGISTRY)
    start = readme.index(table[0])
    assert readme[start:start + len(table)] == table  # change a declaration, and this says to update the README


@pytest.fixture
def toy(tmp_path, monkeypatch) -> Dataset:
    """A dataset declared here only: legacy valuations, into `legacy_values`, by SQL files of the test's own."""
    shred_sql = tmp_path / "shred_legacy_values.sql"
    shred_sql.write_text("SELECT vin, CAST(body->>'retail' AS DOUBLE) AS retail, fetched_at FROM found;\n")
    landing_sql = tmp_path / "land_legacy_values.sql"
    landing_sql.write_text(
        "MERGE INTO legacy_values AS t\n"
        "USING (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin ORDER BY fetched_at DESC) = 1) AS s\n"
        "ON t.vin = s.vin\n"
        "WHEN MATCHED AND s.fetched_at >= t.fetched_at THEN UPDATE\n"
        "WHEN NOT MATCHED THEN INSERT BY NAME;\n")
    dataset = Dataset("legacy_value", "market-value-v1", lambda c, vin, row: c.market_value_v1(vin),
                      markets=frozenset({"US"}), shape={"tradeInValues": (dict, list)}, freshness=timedelta(days=3),
                      tables=(Table("legacy_values", key=("vin",), shred=shred_sql, landing=landing_sql),),
                      default=False)
    monkeypatch.setitem(REGISTRY, dataset.name, dataset)
    return dataset


def test_a_dataset_declared_once_is_planned_fetched_landed_and_reparsed(toy, store, settings, tmp_path):
    from fleet_data.flows.backfill import REPARSE_DATASETS
    from fleet_data.flows.checks import datasets as check_datasets
    from fleet_data.flows.refresh import ORDER as refresh_order
    from fleet_data.tasks.settings import RefreshOptions, check
    from fleet_data.tasks.steps.backfill_tasks import plan_from_frames
    from fleet_data.tasks.steps.backfill_tasks import parse_raw_rows
    from fleet_data.tasks.fetch.enrich import fetch_chunk
    from fleet_data.tasks.land.landing import land_enrichment
    from fleet_data.tasks.plan.due import make_plan, parse_freshness

    # Its table is the one thing outside the registry: a migration would create it.
    store.connection.execute("CREATE TABLE legacy_values (vin VARCHAR PRIMARY KEY, retail DOUBLE, "
                             "run_id VARCHAR, fetched_at TIMESTAMPTZ)")
    assert check_datasets("specs,legacy_value") == ["specs", "legacy_value"]  # `--datasets`
    assert check("datasets", ["legacy_value"], "fleet.toml") == ["legacy_value"]  # `datasets = [...]` in fleet.toml
    assert RefreshOptions(datasets="legacy_value").datasets == ["legacy_value"]  # the flow's options, FLEET_DATASETS
    assert "legacy_value" in refresh_order and "legacy_value" in REPARSE_DATASETS  # the flows' lanes, `--reparse`
    assert parse_freshness({"legacy_value": "1d"})["legacy_value"] == timedelta(days=1)  # `--fresh`
    assert parse_freshness({})["legacy_value"] == timedelta(days=3)

    run = store.start_run("refresh", ["fleet.csv"])
    store.land("vehicles", pl.DataFrame({"vin": VINS, "state": ["TX", "TX", None]}), run)
    plan = make_plan(store, run, ["legacy_value"], tmp_path / "due").datasets["legacy_value"]
    assert (plan.endpoint, plan.due, plan.not_applicable) == ("market-value-v1", 2, 1)  # its markets: US only
    rows = pl.read_parquet(plan.path).to_dicts()

    result = asyncio.run(fetch_chunk("legacy_value", rows, calls=Calls(settings=settings())))
    assert sorted(v for v, _, _ in result.found) == VINS[:2], (result.failed, result.no_data)
    land_enrichment(store, run, result)
    landed = store.sql("SELECT vin, retail FROM legacy_values ORDER BY vin").rows()
    assert [v for v, _ in landed] == VINS[:2] and all(r > 0 for _, r in landed)
    assert make_plan(store, run, ["legacy_value"], tmp_path / "due2").datasets["legacy_value"].due == 0  # fresh now

    again = plan_from_frames("b1", {"legacy_value": pl.DataFrame({"vin": VINS[:1]})}, ["legacy_value"], tmp_path / "b")
    assert (again.datasets["legacy_value"].endpoint, again.datasets["legacy_value"].due) == ("market-value-v1", 1)  # backfill

    stored = store.query("raw_responses_to_reparse", dataset="legacy_value", limit=10, offset=0).to_dicts()
    assert len(stored) == 2
    store.connection.execute("DELETE FROM legacy_values")
    by_run, counts = parse_raw_rows("legacy_value", stored)
    assert counts == {"found": 2, "failed": 0, "skipped": 0}
    for run_id, frames in by_run.items():
        store.land_chunk(frames, run_id)
    assert store.sql("SELECT vin, retail FROM legacy_values ORDER BY vin").rows() == landed


def test_sql_readme_names_the_registrys_datasets():
    text = " ".join((ROOT / "sql" / "README.md").read_text(encoding="utf-8").split())
    listed = re.search(r"`dataset` \(in `failures`, `raw_responses`, `fetch_status`\) is one of (.*?): the names", text)
    assert listed and re.findall(r"`(\w+)`", listed.group(1)) == list(REGISTRY)
