"""Synthetic data: derived from the VIN alone, plausible, and in the proportions the docs promise."""
from __future__ import annotations

import random

from fleet_data.connectors.sandbox.recalls import batch_result, campaign_pool, open_recalls, recall_report
from fleet_data.connectors.sandbox.valuation import market_value_v2
from fleet_data.connectors.sandbox.vehicles import lien_theft, model_year, specs, vehicle

SAMPLE = ["1FA" + "".join(random.Random(7 + i).choices("ABCDEFGHJKLMNPRSTUVWXYZ0123456789", k=14))
          for i in range(3000)]


def test_year_from_position_ten():
    assert model_year("1HGCM8263AA004352") == 2010
    assert model_year("1HGCM8263TA004352") == 2026
    assert model_year("1HGCM8263YA004352") == 2000
    assert model_year("1HGCM82639A004352") == 2009


def test_manufacturer_from_wmi():
    assert vehicle("5YJ3E1EA7KF000001").make == "Tesla"
    assert vehicle("WBA3A5C50DF123456").make == "BMW"
    assert vehicle("KNAFK4A63E5000001").make == "Kia"
    models = {vehicle(v).model for v in SAMPLE[:200]}
    assert models <= {"F-150", "Escape", "Mustang", "Explorer"} and len(models) > 1


def test_same_vin_same_answers_across_calls():
    vin = SAMPLE[0]
    first = (specs(vin), recall_report(vin), market_value_v2(vin, "TX", 30000, "clean"), lien_theft(vin))
    specs.cache_clear(), open_recalls.cache_clear(), lien_theft.cache_clear(), vehicle.cache_clear()
    again = (specs(vin), recall_report(vin), market_value_v2(vin, "TX", 30000, "clean"), lien_theft(vin))
    assert first == again


def test_proportions():
    with_data = [v for v in SAMPLE if vehicle(v).has_data]
    assert 0.01 < 1 - len(with_data) / len(SAMPLE) < 0.06
    share_recalls = sum(bool(open_recalls(v)) for v in with_data) / len(with_data)
    assert 0.25 < share_recalls < 0.45
    share_no_lien = sum(lien_theft(v) is None for v in with_data) / len(with_data)
    assert 0.5 < share_no_lien < 0.7


def test_vin_recalls_are_drawn_from_their_model_pool_and_batch_agrees():
    for vin in SAMPLE[:300]:
        v = vehicle(vin)
        pool = {c["nhtsa_campaign_number"] for c in campaign_pool(v.year, v.make, v.model)}
        assert {c["nhtsa_campaign_number"] for c in open_recalls(vin)} <= pool
        if v.has_data:
            assert batch_result(vin)["recallCount"] == recall_report(vin)["recall_count"]


def test_regional_adjustment_depends_on_state():
    vin = SAMPLE[1]
    groups = {s: market_value_v2(vin, s, None, None)["retail_clean"]["regional_retail_clean"]
              for s in ("CA", "TX", "NY", "FL")}
    assert len(set(groups.values())) > 1
