"""Campaign details of VINs whose batch check found recalls, against the sandbox.

A batch answer gives a count per VIN. The campaigns come from `/v1/recalls?vin=` for each VIN by
default; the model's list (`/v1/recalls-ymm`) is an opt-in saving that only fits the count, so its
rows say `matched_by = 'model'` and the views keep them apart from confirmed ones.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from fleet_data.connectors.sandbox.recalls import campaign_pool, open_recalls
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.recalls.details import fetch_recall_details

# Two 2018 Honda CR-Vs with two open campaigns each (not the same two), as the sandbox has them.
CRV_A, CRV_B = "1HGCM8264JA000002", "1HGCM8266JA000020"
# The decode the test lands says "Odyssey": its model list also holds two campaigns, so a
# by-model match "fits" the batch's count while naming campaigns these vehicles do not have.
LABEL = (2018, "Honda", "Odyssey")
CHECKED = datetime.now(timezone.utc) - timedelta(minutes=5)


def campaigns(vin: str) -> set[str]:
    return {c["nhtsa_campaign_number"] for c in open_recalls(vin)}


@pytest.fixture
def checked_by_batch(store):
    store.land("vehicles", pl.DataFrame({"vin": [CRV_A, CRV_B], "unit_number": ["A", "B"]}), "r1")
    year, make, model = LABEL
    store.land("specs", pl.DataFrame({"vin": [CRV_A, CRV_B], "year": [year] * 2, "make": [make] * 2,
                                      "model": [model] * 2, "fetched_at": [CHECKED] * 2}), "r1")
    store.land("recall_checks", pl.DataFrame([
        {"vin": v, "checked_via": "batch", "batch_id": "b1", "has_recalls": True, "recall_count": 2, "fetched_at": CHECKED}
        for v in (CRV_A, CRV_B)]), "r1")
    assert len(campaign_pool(*LABEL)) == 2 and campaigns(CRV_A) != campaigns(CRV_B)
    assert not campaigns(CRV_A) & {c["nhtsa_campaign_number"] for c in campaign_pool(*LABEL)}
    return store


def test_by_default_each_vin_gets_its_own_campaigns(checked_by_batch, sandbox, settings):
    db = checked_by_batch
    outcome = asyncio.run(fetch_recall_details(db, "r1", calls=Calls(settings=settings())))
    assert sandbox.count("/v1/recalls-ymm") == 0
    assert sandbox.count("/v1/recalls") == 2
    assert (outcome.by_vin, outcome.by_model) == (2, 0)
    for vin in (CRV_A, CRV_B):
        rows = db.sql("SELECT nhtsa_campaign_number, matched_by FROM recalls WHERE vin = $v", {"v": vin}).rows()
        assert {c for c, _ in rows} == campaigns(vin)
        assert {m for _, m in rows} == {"vin"}
    overview = db.sql("SELECT vin, open_recall_count, likely_recall_count FROM vehicle_overview ORDER BY vin").rows()
    assert overview == [(CRV_A, 2, 0), (CRV_B, 2, 0)]
    assert db.sql("SELECT DISTINCT matched_by FROM open_recalls").rows() == [("vin",)]


def test_the_model_list_is_opt_in_and_marked_likely(checked_by_batch, sandbox, settings):
    db = checked_by_batch
    outcome = asyncio.run(fetch_recall_details(db, "r1", calls=Calls(settings=settings()), match="model"))
    assert sandbox.count("/v1/recalls-ymm") == 1 and sandbox.count("/v1/recalls") == 0
    assert (outcome.by_vin, outcome.by_model) == (0, 2)
    pool = {c["nhtsa_campaign_number"] for c in campaign_pool(*LABEL)}
    rows = db.sql("SELECT vin, nhtsa_campaign_number, matched_by FROM open_recalls ORDER BY ALL").rows()
    assert {(v, c) for v, c, _ in rows} == {(v, c) for v in (CRV_A, CRV_B) for c in pool}
    assert {m for _, _, m in rows} == {"model"}
    # The batch confirmed two open recalls on each VIN; which two is only likely.
    overview = db.sql("SELECT vin, open_recall_count, likely_recall_count FROM vehicle_overview ORDER BY vin").rows()
    assert overview == [(CRV_A, 2, 2), (CRV_B, 2, 2)]
    # The listing is stored once, as the service sent it, with what was asked (shredded in SQL from those bytes).
    raw = db.sql("SELECT vin, request_params, body FROM raw_responses WHERE endpoint = '/v1/recalls-ymm'").rows()
    assert len(raw) == 1 and raw[0][0] is None and set(json.loads(raw[0][1])) == {"year", "make", "model"}
    assert {c["nhtsa_campaign_number"] for c in json.loads(raw[0][2])["data"]["recalls"]} == pool

    # A later per-VIN lookup confirms the real campaigns and closes the guessed ones.
    later = asyncio.run(fetch_recall_details(db, "r1", calls=Calls(settings=settings())))
    assert later.due == 0  # the model listing counted as a listing: nothing is due again this run
    db.land("recall_checks", pl.DataFrame([{"vin": CRV_A, "checked_via": "batch", "batch_id": "b2", "has_recalls": True,
                                            "recall_count": 2, "fetched_at": datetime.now(timezone.utc)}]), "r2")
    db.land("vehicles", pl.DataFrame({"vin": [CRV_A], "unit_number": ["A"]}), "r2")
    asyncio.run(fetch_recall_details(db, "r2", calls=Calls(settings=settings())))
    rows = db.sql("SELECT nhtsa_campaign_number, matched_by FROM open_recalls WHERE vin = $v", {"v": CRV_A}).rows()
    assert {c for c, _ in rows} == campaigns(CRV_A) and {m for _, m in rows} == {"vin"}
    assert db.sql("SELECT open_recall_count, likely_recall_count FROM vehicle_overview WHERE vin = $v",
                  {"v": CRV_A}).row(0) == (2, 0)
