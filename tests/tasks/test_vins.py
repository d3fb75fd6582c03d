"""Every VIN rule, row in / row out, for the vectorised expressions and the scalar helper."""

import polars as pl
import pytest

from fleet_data.tasks.ingest.vins import (
    check_digit,
    check_digit_expr,
    check_digit_valid_expr,
    is_valid_vin,
    normalise_vin_expr,
    reject_reason,
    vin_reject_reason_expr,
)

CASES = [
    # raw value, normalised, reject reason
    ("1HGCM82633A004352", "1HGCM82633A004352", None),
    ("  1hgcm82633a004352\t", "1HGCM82633A004352", None),  # trim + upper case
    ("1HG-CM826 33A00-4352", "1HGCM82633A004352", None),  # inner spaces and dashes
    ("", None, "missing"),
    ("   ", None, "missing"),
    (None, None, "missing"),
    ("1HGCM82633A00435", "1HGCM82633A00435", "wrong_length"),
    ("1HGCM82633A0043521", "1HGCM82633A0043521", "wrong_length"),
    ("N/A", "N/A", "wrong_length"),
    ("1HGCM8263IA004352", "1HGCM8263IA004352", "invalid_characters"),  # I
    ("1HGCM8263OA004352", "1HGCM8263OA004352", "invalid_characters"),  # O
    ("1HGCM8263QA004352", "1HGCM8263QA004352", "invalid_characters"),  # Q
    ("1HGCM8263#A004352", "1HGCM8263#A004352", "invalid_characters"),  # punctuation
    ("1HGCM82634A004352", "1HGCM82634A004352", "check_digit"),  # North American, wrong digit
    ("5YJ3E1EA7JF000316", "5YJ3E1EA7JF000316", "check_digit"),
    ("WBA3A5C51CF256651", "WBA3A5C51CF256651", None),  # European: check digit advisory only
    ("11111111111111111", "11111111111111111", None),  # the textbook all-ones VIN is valid
    ("1M8GDM9AXKP042788", "1M8GDM9AXKP042788", None),  # check digit 'X'
    # Characters that hide, or pass for VIN characters: named, never cleaned away.
    ("1HGC\u200bM82633A004352", "1HGC\u200bM82633A004352", "invisible_characters"),  # zero-width space
    ("\ufeff1hgcm82633a004352", "\ufeff1HGCM82633A004352", "invisible_characters"),  # BOM
    ("1HGCM\u00ad82633A004352", "1HGCM\u00ad82633A004352", "invisible_characters"),  # soft hyphen
    ("1HGCM82633A00\x014352", "1HGCM82633A00\x014352", "invisible_characters"),  # a control character
    ("1HGCM82633\u0410004352", "1HGCM82633\u0410004352", "confusable_characters"),  # Cyrillic A
    ("1HGCM82633A\u039f04352", "1HGCM82633A\u039f04352", "confusable_characters"),  # Greek Omicron
    ("\uff11HGCM82633A004352", "\uff11HGCM82633A004352", "confusable_characters"),  # full-width 1
    ("1hgcm82633a00435\u0131", "1hgcm82633a00435\u0131", "confusable_characters"),  # dotless i: upper-cased, I
    (" 1hgcm8263\u00df004352", " 1hgcm8263\u00df004352", "confusable_characters"),  # sharp s: upper-cased, SS
    ("1HGCM82633\u00c4004352", "1HGCM82633\u00c4004352", "invalid_characters"),  # an accented letter shows
]


def test_expressions_row_in_row_out():
    frame = pl.DataFrame({"raw": [c[0] for c in CASES]}, schema={"raw": pl.String})
    out = frame.with_columns(normalise_vin_expr("raw").alias("vin")).with_columns(
        vin_reject_reason_expr("vin").alias("reason")
    )
    assert out["vin"].to_list() == [c[1] for c in CASES]
    assert out["reason"].to_list() == [c[2] for c in CASES]


@pytest.mark.parametrize("raw,_normal,reason", CASES)
def test_scalar_helper_agrees(raw, _normal, reason):
    assert reject_reason(raw) == reason
    assert is_valid_vin(raw) is (reason is None)


def test_check_digit_values_and_x():
    vins = ["1HGCM82633A004352", "1M8GDM9AXKP042788", "WBA3A5C51CF256651", "1HGCM8263"]
    out = pl.DataFrame({"vin": vins}).select(
        check_digit_expr("vin").alias("digit"), check_digit_valid_expr("vin").alias("ok")
    )
    assert out["digit"].to_list() == ["3", "X", "7", None]
    assert out["ok"].to_list() == [True, True, False, None]
    assert check_digit("1M8GDM9AXKP042788") == "X"


def test_non_north_american_bad_check_digit_is_recorded_not_rejected():
    frame = pl.DataFrame({"vin": ["WBA3A5C51CF256651", "JTDKARFU4HL133505", "2T1BURHE0JC012345"]})
    out = frame.select(vin_reject_reason_expr("vin").alias("reason"), check_digit_valid_expr("vin").alias("ok"))
    # W (Germany) and J (Japan) are outside 1-5: never rejected for the digit; 2 (Canada) is.
    assert out["reason"].to_list()[:2] == [None, None]
    assert out["reason"][2] == (None if check_digit("2T1BURHE0JC012345") == "0" else "check_digit")


def test_frame_helper_matches_expression():
    vins = [c[1] for c in CASES]
    frame = pl.DataFrame({"vin": vins}, schema={"vin": pl.String})
    expected = frame.select(check_digit_valid_expr("vin").alias("check_digit_valid"))
    from fleet_data.tasks.ingest.vins import with_check_digit_valid

    assert with_check_digit_valid(frame).select("check_digit_valid").equals(expected)


def test_frame_helper_matches_expression_across_its_blocks(monkeypatch):
    """The bytes are checked in blocks: every block boundary keeps each VIN's own answer."""
    import fleet_data.tasks.ingest.vins as vins_module

    monkeypatch.setattr(vins_module, "_BLOCK", 2)
    values = [c[1] for c in CASES] + ["1hgcm82633a004352", "1HGCM82633A004352", "1HGCM82633A00435", None, "ÄHGCM82633A00435"]
    frame = pl.DataFrame({"vin": values * 3}, schema={"vin": pl.String})
    expected = frame.select(check_digit_valid_expr("vin").alias("check_digit_valid"))
    assert vins_module.with_check_digit_valid(frame).select("check_digit_valid").equals(expected)


@pytest.mark.parametrize("extra", [[], ["SHORT", None]])
def test_vin_order_sorts_as_strings_do_keeping_equal_vins_in_order(extra):
    from fleet_data.tasks.ingest.vins import vin_order

    vins = ["WBA3A5C51CF256651", "1HGCM82633A004352", "1HGCM82633A004353", "1HGCM82633A004352", "JTDKARFU4HL133505",
            "1HGCM82633A00435Z", "0ZZZZZZZZZZZZZZZZ", "1HGCM82633A004352"] + extra
    frame = pl.DataFrame({"vin": vins, "row": range(len(vins))}, schema={"vin": pl.String, "row": pl.Int64})
    expected = frame.sort("vin", maintain_order=True)
    assert frame[vin_order(frame["vin"])].equals(expected)
