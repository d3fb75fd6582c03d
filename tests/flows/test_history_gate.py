"""Which valuation chunks may start while the history lands (flows/refresh.py `HistoryGate`), on real due lists.

The due lists are Parquet files as the plan stages them; a valuation chunk waits exactly while a history chunk that
may hold one of its VINs has not landed, whatever order the lists are in, and never for VINs the history does not ask.
"""

from __future__ import annotations

from collections import deque

import polars as pl

from fleet_data.flows.refresh import HistoryGate
from fleet_data.tasks.plan.due import DatasetPlan, Plan


def _due(tmp_path, dataset: str, vins: list[str]) -> DatasetPlan:
    path = tmp_path / f"{dataset}.parquet"
    pl.DataFrame({"vin": vins}).write_parquet(path)
    return DatasetPlan(dataset=dataset, endpoint=dataset, roster=len(vins), due=len(vins), skipped_fresh=0,
                       estimated_units=len(vins), path=str(path))


def _gate(tmp_path, history: list[str], values: list[str], size: int) -> tuple[HistoryGate, dict[str, deque]]:
    plan = Plan(run_id="r1", datasets={"history": _due(tmp_path, "history", history),
                                       "market_value": _due(tmp_path, "market_value", values),
                                       "specs": _due(tmp_path, "specs", values)})
    lanes = {d: deque(plan.datasets[d].chunks(size)) for d in plan.datasets}
    return HistoryGate(plan, lanes), lanes


def test_a_valuation_chunk_waits_for_the_history_chunks_over_its_vins_only(tmp_path):
    vins = [f"V{i:03d}" for i in range(12)]
    gate, _ = _gate(tmp_path, vins, vins, 4)  # three chunks each: V000-V003, V004-V007, V008-V011
    assert [gate.waits("market_value", offset) for offset in (0, 4, 8)] == [True, True, True]
    gate.landed("history", 0)
    assert [gate.waits("market_value", offset) for offset in (0, 4, 8)] == [False, True, True]
    gate.landed("market_value", 4)  # another dataset's landing opens nothing
    gate.landed("history", 8)
    assert [gate.waits("market_value", offset) for offset in (0, 4, 8)] == [False, True, False]
    gate.landed("history", 4)
    assert not any(gate.waits("market_value", offset) for offset in (0, 4, 8))
    assert not gate.waits("specs", 0)  # asks no mileage: never waits


def test_vins_the_history_does_not_ask_start_at_once_and_order_does_not_matter(tmp_path):
    history = ["V009", "V001", "V005", "V002"]  # not in VIN order: one chunk spans V001-V009
    values = ["V010", "V011", "V012", "V000", "V003", "V004"]
    gate, _ = _gate(tmp_path, history, values, 2)  # history chunks V001-V009 and V002-V005
    assert gate.waits("market_value", 0) is False  # V010-V011: no history chunk may hold them
    assert gate.waits("market_value", 2) is True  # V000-V012 spans both
    assert gate.waits("market_value", 4) is True  # V003-V004
    gate.landed("history", 0)
    assert gate.waits("market_value", 2) is True and gate.waits("market_value", 4) is True  # V002-V005 still out
    gate.landed("history", 2)
    assert not any(gate.waits("market_value", offset) for offset in (0, 2, 4))
