"""VIN endpoints: success shapes and every documented error message, word for word."""
from __future__ import annotations

import pytest

from fleet_data.connectors.sandbox import errors
from .sandbox_http import KEY, VIN, VIN_INTERNATIONAL, VIN_NO_DATA, VIN_NO_RECALLS, assert_error, get

VIN_PATHS = ["/specs", "/v1/international-vin-decoder", "/v1/recalls", "/v2/marketvalue", "/history",
             "/v1/lien-theft"]


@pytest.mark.parametrize("path", VIN_PATHS)
def test_vin_validation_messages(http, path):
    assert_error(get(http, path), 400, "Missing vin (vehicle identification number)")
    assert_error(get(http, path, vin="1HGCM8263"), 400, "Wrong VIN length, must be 17 characters")
    assert_error(get(http, path, vin="1HGCM82633A00435O"), 400, "Invalid VIN")


@pytest.mark.parametrize("path", VIN_PATHS + ["/marketvalue"])
def test_missing_key_comes_before_validation(http, path):
    assert_error(get(http, path, key=None, vin=VIN), 401, "Missing API key")
    assert_error(get(http, path, key=""), 401, "Missing API key")


def test_specs_success_shape_and_key_echo(http):
    body = get(http, "/specs", vin=VIN).json()
    assert body["success"] is True
    assert body["input"] == {"key": KEY, "vin": VIN}
    attributes = body["attributes"]
    assert set(attributes) == {"year", "make", "model", "trim", "style", "type", "made_in", "doors", "fuel_type",
                               "engine", "engine_cylinders", "transmission", "drivetrain"}
    assert all(isinstance(v, str) for v in attributes.values())
    assert attributes["make"] == "Honda" and attributes["year"] == "2003"  # WMI 1HG, position 10 '3'
    assert all(set(c) == {"category", "name"} for c in body["colors"])
    assert set(body["equipment"].values()) <= {"Std.", "Opt.", "N/A"}
    assert all(set(w) == {"type", "miles", "months"} for w in body["warranties"])
    assert body["timestamp"].endswith("Z")


def test_specs_are_deterministic(http):
    first, second = get(http, "/specs", vin=VIN).json(), get(http, "/specs", vin=VIN).json()
    first.pop("timestamp"), second.pop("timestamp")
    assert first == second


def test_specs_no_data_message(http):
    assert_error(get(http, "/specs", vin=VIN_NO_DATA), 404,
                 "No data found for this VIN. Try a deep search by setting deepdata=1 in your request")


def test_specs_international_fallback_and_disable(http):
    body = get(http, "/specs", vin=VIN_INTERNATIONAL).json()
    assert {"vin", "vid", "make", "model"} <= set(body["attributes"])
    assert body["attributes"]["make"] == "BMW"
    assert_error(get(http, "/specs", vin=VIN_INTERNATIONAL, disableIntVINDecoding="1"), 404, errors.NO_DATA_SPECS)


def test_specs_xml(http):
    response = get(http, "/specs", vin=VIN, format="xml")
    assert response.headers["content-type"].startswith("application/xml")
    assert "<make>Honda</make>" in response.text


def test_international_decoder(http):
    body = get(http, "/v1/international-vin-decoder", vin=VIN_INTERNATIONAL).json()
    assert body["attributes"]["vin"] == VIN_INTERNATIONAL
    assert_error(get(http, "/v1/international-vin-decoder", vin=VIN_NO_DATA), 404, "No data found for this VIN")


def test_recalls_by_vin(http):
    data = get(http, "/v1/recalls", vin=VIN).json()["data"]
    assert data["vin"] == VIN and data["has_recalls"] and data["recall_count"] == len(data["recalls"]) > 0
    for recall in data["recalls"]:
        day, month, year = recall["report_received_date"].split("/")
        assert len(day) == 2 and len(month) == 2 and len(year) == 4
        assert isinstance(recall["park_it"], bool) and "nhtsa_campaign_number" in recall
    none = get(http, "/v1/recalls", vin=VIN_NO_RECALLS).json()["data"]
    assert none["recalls"] == [] and none["has_recalls"] is False
    assert_error(get(http, "/v1/recalls", vin=VIN_NO_DATA), 404, "No data found for this VIN")


def test_recalls_ymm_is_the_pool_the_vin_recalls_come_from(http):
    data = get(http, "/v1/recalls", vin=VIN).json()["data"]
    pool = get(http, "/v1/recalls-ymm", year=data["model_year"], make=data["make"].upper(),
               model=data["model"].lower()).json()["data"]
    numbers = {r["nhtsa_campaign_number"] for r in pool["recalls"]}
    assert {r["nhtsa_campaign_number"] for r in data["recalls"]} <= numbers
    assert pool["recall_count"] == len(pool["recalls"]) and pool["make"] == data["make"]


@pytest.mark.parametrize("params", [{}, {"year": "2015", "make": "Honda"}, {"year": "15", "make": "Honda",
                                                                             "model": "Civic"}])
def test_recalls_ymm_missing_parameters(http, params):
    assert_error(get(http, "/v1/recalls-ymm", **params), 400, "Missing required parameters")


def test_market_value_v2_rules(http):
    plain = get(http, "/v2/marketvalue", vin=VIN).json()
    assert plain["input"] == {"vin": VIN, "state": "", "country": "US"}
    for name in ("whole_xclean", "retail_avg", "trade_in_clean", "trade_in_rough"):
        kind, tier = name.rsplit("_", 1) if not name.startswith("trade_in") else ("trade_in", name[9:])
        group = plain[name]
        assert group[f"mileage_{kind}_{tier}"] == 0
        assert group[f"adjusted_{kind}_{tier}"] == (group[f"base_{kind}_{tier}"] + group[f"add_deduct_{kind}_{tier}"]
                                                    + group[f"regional_{kind}_{tier}"])
    assert "trade_in_xclean" not in plain
    assert isinstance(plain["model_year"], str) and isinstance(plain["msrp"], (int, float))
    assert plain["retail_clean"]["regional_retail_clean"] == 0

    valued = get(http, "/v2/marketvalue", vin=VIN, state="CA", mileage="150000", condition="excellent").json()
    band = next(b for b in valued["mileage_list"] if b["range_begin"] <= 150000 <= b["range_end"])
    group = valued["retail_xclean"]
    assert group["mileage_retail_xclean"] == band["xclean"] != 0
    assert group["adjusted_retail_xclean"] == sum(group[f"{p}_retail_xclean"]
                                                  for p in ("base", "mileage", "add_deduct", "regional"))
    assert group["regional_retail_xclean"] != 0  # CA has a regional adjustment
    assert valued["retail_clean"]["mileage_retail_clean"] == 0  # only the asked condition's tier


def test_market_value_v2_older_is_cheaper_and_mileage_lowers_value(http):
    newer = get(http, "/v2/marketvalue", vin="1HGCM8263PA004352").json()  # P = 2023
    older = get(http, "/v2/marketvalue", vin="1HGCM82637A004352").json()  # 7 = 2007
    assert newer["model_year"] == "2023" and older["model_year"] == "2007"
    low = get(http, "/v2/marketvalue", vin=VIN, mileage="5000", condition="clean").json()
    high = get(http, "/v2/marketvalue", vin=VIN, mileage="290000", condition="clean").json()
    assert low["retail_clean"]["adjusted_retail_clean"] > high["retail_clean"]["adjusted_retail_clean"]


def test_market_value_v2_errors(http):
    assert_error(get(http, "/v2/marketvalue", vin=VIN, condition="mint"), 400,
                 "Invalid condition. Available conditions: excellent, clean, average, rough")
    assert_error(get(http, "/v2/marketvalue", vin=VIN, mileage="lots"), 400, "Invalid mileage. Must be a number")
    assert_error(get(http, "/v2/marketvalue", vin=VIN_NO_DATA), 404, "No data found for this VIN")


def test_market_value_v1_strings_and_legacy_500(http):
    body = get(http, "/marketvalue", vin=VIN).json()
    for name in ("retail", "tradeIn", "roughTradeIn", "averageTradeIn", "loanValue", "msrp"):
        assert isinstance(body[name], str) and body[name].isdigit()
    assert isinstance(body["uid"], int)
    assert set(body["auctionValues"]) == {"lowAuctionValue", "averageAuctionValue", "highAuctionValue", "dateRange"}
    assert_error(get(http, "/marketvalue"), 500, "Missing vin (vehicle identification number)")
    assert_error(get(http, "/marketvalue", vin="SHORT"), 500, "Wrong VIN length, must be 17 characters")
    assert_error(get(http, "/marketvalue", vin=VIN_NO_DATA), 404, "No data found for this VIN")
    assert get(http, "/marketvalue", vin=VIN, format="xml").text.startswith("<?xml")


def test_history(http):
    body = get(http, "/history", vin=VIN).json()
    for name in ("junkAndSalvageInformation", "insuranceInformation", "brandsInformation",
                 "currentTitleInformation", "historyInformation"):
        assert isinstance(body[name], list)
    assert body["brandsRecordCount"] == len(body["brandsInformation"])
    assert isinstance(body["vinChanged"], bool)
    assert_error(get(http, "/history", vin=VIN_NO_DATA), 404, "No data found for this VIN")
    assert_error(get(http, "/history", key="test_blocked", vin=VIN), 403,
                 "This API key has been blocked, please contact support if you believe this is an error.")


def test_lien_theft(http):
    body = get(http, "/v1/lien-theft", vin="1HGCM82633A004355").json()
    assert body["input"] == {"vin": "1HGCM82633A004355"} and isinstance(body["year"], int)
    assert body["events"] and all(set(e) == {"event", "location", "details_list"} for e in body["events"])
    assert_error(get(http, "/v1/lien-theft", vin=VIN_NO_RECALLS), 404, "No lien or theft data found for this VIN")


@pytest.mark.parametrize("serial,status,message,retryable", [
    ("000500", 500, "Internal server error", None),
    ("000501", 500, "Unable to authenticate internal request (code CV-001). Please try again later", None),
    ("000502", 502, "Could not fetch data", True),
    ("000503", 503, "Cannot access the internet at this time", True),
    ("000504", 504, "Request timed out. Please try again.", True),
])
def test_magic_vins_answer_upstream_failures(http, serial, status, message, retryable):
    response = get(http, "/specs", vin="1HGCM82633A" + serial)
    body = assert_error(response, status, message)
    assert body.get("retryable") is retryable
    assert response.headers.get("Retry-After") == ("60" if retryable else None)


def test_history_authentication_failure_is_cv_002(http):
    assert_error(get(http, "/history", vin="1HGCM82633A000501"), 500,
                 "Unable to authenticate internal request (code CV-002). Please try again later")
