"""Hostile fleet files: each gives one clear error, or a per-row outcome for every row. Never a traceback.

The corpus is tests/fixtures/fleets/hostile/ (made by tests/fixtures/make_awkward_fleets.py); the 100 MB
single line is made here, once per module, and never committed.
"""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from fleet_data.tasks.ingest.fleet_files import FleetFileError, read_fleet
from fleet_data.tasks.ingest.vins import is_valid_vin
from fleet_data.tasks.store.database import open_database

ROOT = Path(__file__).resolve().parents[2]
FLEETS = ROOT / "tests" / "fixtures" / "fleets"
HOSTILE = FLEETS / "hostile"
V1, V2, V3, V4 = "1HGCM82633A004352", "1FTFW1E50KFA12345", "5YJ3E1EA2JF000316", "WBA3A5C51CF256651"
FORMULAS = ['=HYPERLINK("http://x","y")', "+cmd", "-2+3", "@SUM(1)"]

# file -> (what is wrong, what to do): both must be in the one-line message, with the file's path.
UNUSABLE = {
    FLEETS / "empty.csv": ("file is empty", "header row with a VIN column"),
    HOSTILE / "whitespace_only.csv": ("file is empty", "header row with a VIN column"),
    FLEETS / "header_only.csv": ("has a header but no data rows", "add one vehicle per row"),
    HOSTILE / "header_and_blank_lines.csv": ("has a header but no data rows", "add one vehicle per row"),
    FLEETS / "no_vin_column.csv": ("no VIN column found (columns: unit, plate)", "pass --vin-column"),
    FLEETS / "not_a_fleet.xlsx": ("not a CSV or Parquet file (an Excel workbook", "export the fleet as CSV"),
    HOSTILE / "zip_named.csv": ("not a CSV or Parquet file (an Excel workbook", "export the fleet as CSV"),
    HOSTILE / "png_named.csv": ("not a CSV or Parquet file (a PNG image)", "export the fleet as CSV"),
    HOSTILE / "random_bytes.csv": ("not a CSV or Parquet file (binary content)", "export the fleet as CSV"),
    HOSTILE / "random_bytes_no_nul.csv": ("not a CSV or Parquet file (binary content)", "export the fleet as CSV"),
    HOSTILE / "utf16_without_bom.csv": ("not a CSV or Parquet file (binary content)", "export the fleet as CSV"),
    HOSTILE / "junk.parquet": ("unreadable Parquet file", "write it again"),
    HOSTILE / "truncated.parquet": ("unreadable Parquet file", "write it again"),
    HOSTILE / "csv_named.parquet": ("not a Parquet file (missing PAR1 magic)", "name it .csv"),
    HOSTILE / "vin_list.parquet": ("the VIN column 'vin' holds lists", "write one VIN per row as text"),
    HOSTILE / "vin_struct.parquet": ("the VIN column 'vin' holds records", "write one VIN per row as text"),
    HOSTILE / "unterminated_quote.csv": ("a quote opened in row 1 is never closed", "closes its quotes"),
    HOSTILE / "ragged_row.csv": ("row 2 has 4 fields, the header 2", "as many fields as the header"),
}


def assert_clear(error: FleetFileError, path: Path | str, *phrases: str) -> None:
    message = str(error)
    assert message.startswith(f"{path}: ")
    assert "\n" not in message and "\r" not in message
    assert len(message) < 400, message
    for phrase in phrases:
        assert phrase in message, message


def assert_every_row_accounted(result, records: int) -> None:
    """`records` = data records in the file, counted without our reader: none may vanish."""
    assert result.rows_in + result.blank_rows == records
    assert result.rows_in == result.valid + result.rejected_count + result.duplicates
    assert result.valid == result.roster.height
    assert result.duplicates == result.roster["duplicate_count"].sum()


def csv_records(path: Path) -> int:
    with path.open(newline="", encoding="utf-8") as handle:
        return sum(1 for _ in csv.reader(handle)) - 1  # minus the header


@pytest.mark.parametrize("path", list(UNUSABLE), ids=lambda p: p.name)
def test_unusable_file_gives_one_clear_line(path):
    with pytest.raises(FleetFileError) as caught:
        read_fleet([path])
    assert_clear(caught.value, path, *UNUSABLE[path])


@pytest.fixture(scope="module")
def hundred_mb_line(tmp_path_factory):
    """A 100 MB file that is one line with no line break (a header 'vin,notes' glued to 100 MB of text)."""
    path = tmp_path_factory.mktemp("huge") / "one_line.csv"
    chunk = b"A" * (1 << 20)
    with path.open("wb") as handle:
        handle.write(b"vin,notes,")
        for _ in range(100):
            handle.write(chunk)
    yield path
    path.unlink()  # pytest keeps the last runs' temporary folders: not 100 MB of them each


def test_a_100_mb_line_without_a_break_is_refused_from_its_first_64_kb(hundred_mb_line):
    with pytest.raises(FleetFileError) as caught:
        read_fleet([hundred_mb_line])
    assert_clear(caught.value, hundred_mb_line, "no line break in the first 64 KB", "104,857,610-byte file",
                 "expected a header row, then one vehicle per line")


def test_a_huge_header_does_not_make_a_huge_message(tmp_path):
    # Under the 64 KB line limit, but 4,000 columns: the message lists a few, not all.
    path = tmp_path / "wide.csv"
    path.write_text(",".join(f"column_{i}" for i in range(4000)) + "\n" + ",".join("x" * 4000) + "\n")
    with pytest.raises(FleetFileError) as caught:
        read_fleet([path])
    assert_clear(caught.value, path, "no VIN column found (columns: column_0, column_1", "and 3992 more")


def test_one_line_message_even_when_the_header_holds_line_breaks_and_controls(tmp_path):
    path = tmp_path / "odd_header.csv"
    path.write_bytes(b'"unit\nnumber","plate\x07"\n1,ABC\n')
    with pytest.raises(FleetFileError) as caught:
        read_fleet([path])
    assert_clear(caught.value, path, "no VIN column found", "'unit number'")


def test_vin_spellings_each_get_their_own_outcome():
    path = HOSTILE / "vin_spellings.csv"
    result = read_fleet([path])
    assert result.roster.select("vin", "source_row", "case", "duplicate_count").rows() == [
        (V1, 1, "plain", 2),  # rows 10 (lower case) and 11 (dashes and spaces) collapse into it
        (V2, 2, "surrounding spaces", 0),
        (V3, 3, "lower case", 1),  # row 13 (no-break space)
        (V4, 4, "embedded spaces", 0),
    ]
    assert result.rejected.select("source_row", "reason").rows() == [
        (5, "invalid_characters"),  # I
        (6, "invalid_characters"),  # O
        (7, "invalid_characters"),  # Q
        (8, "wrong_length"),  # 16 characters
        (9, "wrong_length"),  # 18 characters
        (12, "invisible_characters"),  # a zero-width space: not cleaned away, named
        (14, "missing"),
        (15, "check_digit"),
        (16, "confusable_characters"),  # a full-width digit looks like one and is not a VIN character
    ]
    # The raw value is kept as the user typed it, so they can find and fix the row.
    assert result.rejected.filter(pl.col("source_row") == 8)["raw_value"].item() == V1[:16]
    assert (result.rows_in, result.valid, result.duplicates, result.rejected_count) == (16, 4, 3, 9)
    assert_every_row_accounted(result, csv_records(path))


def test_formulas_in_the_vin_column_are_rejected_and_elsewhere_kept_as_typed():
    path = HOSTILE / "formula_injection.csv"
    result = read_fleet([path])
    assert result.rejected.select("source_row", "raw_value", "reason").rows() == [
        (1, FORMULAS[0], "wrong_length"),
        (2, "+cmd", "wrong_length"),
        (3, "-2+3", "wrong_length"),
        (4, "@SUM(1)", "wrong_length"),
    ]
    assert result.roster.select("vin", "unit_number", "notes").rows() == [
        (V1, FORMULAS[0], "=1+1"),
        (V2, "+cmd", "@SUM(1)"),
        (V3, "-2+3", "ok"),
    ]
    assert_every_row_accounted(result, csv_records(path))


def test_formula_text_lands_and_exports_as_inert_text(tmp_path):
    """What the refresh writes (DuckDB tables, the Parquet lake) holds the formulas as plain strings.

    Nothing in the pipeline writes CSV; the lake is Parquet only, where a string column is never evaluated.
    """
    result = read_fleet([HOSTILE / "formula_injection.csv"])
    with open_database(tmp_path / "fleet.duckdb") as db:
        run_id = db.start_run("refresh", result.files, {})
        db.land_chunk({"vehicles": result.roster, "rejected_rows": result.rejected}, run_id)
        stored = db.sql("SELECT raw_value FROM rejected_rows ORDER BY source_row")["raw_value"].to_list()
        units = db.sql("SELECT unit_number, extra->>'notes' AS notes FROM vehicles ORDER BY source_row").rows()
        db.export_parquet(tmp_path / "lake", ["vehicles", "rejected_rows"])
    assert stored == FORMULAS
    assert units == [(FORMULAS[0], "=1+1"), ("+cmd", "@SUM(1)"), ("-2+3", "ok")]
    lake_rejects = pq.read_table(tmp_path / "lake" / "rejected_rows").sort_by("source_row")
    assert str(lake_rejects.schema.field("raw_value").type) == "string"
    assert lake_rejects.column("raw_value").to_pylist() == FORMULAS
    lake_vehicles = pq.read_table(tmp_path / "lake" / "vehicles").sort_by("source_row")
    assert lake_vehicles.column("unit_number").to_pylist() == [FORMULAS[0], "+cmd", "-2+3"]
    assert {p.suffix for p in (tmp_path / "lake").rglob("*") if p.is_file()} == {".parquet"}


def test_int64_vin_column_rejects_each_row_as_not_text():
    path = HOSTILE / "vin_int64.parquet"
    result = read_fleet([path])
    assert result.rejected.select("source_row", "raw_value", "reason").rows() == [
        (1, "123", "not_text"),
        (2, "12345678901234567", "not_text"),  # was check_digit: a reason about digits that were never a VIN
        (3, None, "missing"),
    ]
    assert_every_row_accounted(result, pq.ParquetFile(path).metadata.num_rows)


def test_binary_vin_column_is_decoded_and_undecodable_bytes_are_shown_not_dropped():
    path = HOSTILE / "vin_binary.parquet"
    result = read_fleet([path])
    assert result.roster.select("vin", "unit_number").rows() == [(V1, "a"), (V3, "c")]
    assert result.rejected.select("source_row", "raw_value", "reason").rows() == [
        (2, "\ufffd\ufffd" + V2[2:], "invalid_characters")
    ]
    assert_every_row_accounted(result, pq.ParquetFile(path).metadata.num_rows)


def test_other_columns_of_any_parquet_type_are_kept_as_text():
    # Lists used to be dropped and bytes to stop the read with a polars traceback.
    result = read_fleet([HOSTILE / "odd_other_columns.parquet"])
    assert result.roster.select("vin", "tags", "blob", "service", "seen").rows() == [
        (V1, '["north","é"]', "\x00\ufffd", '{"due":3,"shop":"A"}', "2026-01-02 03:04:05.000000"),
        (V2, "[]", None, None, None),
    ]
    assert_every_row_accounted(result, 2)


def test_nul_bytes_past_the_sniffed_head_land_as_a_reject(tmp_path):
    # The binary check reads 64 KB; a NUL further on is one bad row, not a lost file or a crash in DuckDB.
    path = tmp_path / "late_nul.csv"
    path.write_bytes(b"vin\n" + f"{V1}\n".encode() * 5000 + b"\x00\x00junk\n")
    result = read_fleet([path])
    assert result.rejected.select("source_row", "raw_value", "reason").rows() == [(5001, "\x00\x00junk", "invisible_characters")]
    assert (result.valid, result.duplicates) == (1, 4999)
    with open_database(tmp_path / "fleet.duckdb") as db:
        run_id = db.start_run("refresh", result.files, {})
        db.land_chunk({"vehicles": result.roster, "rejected_rows": result.rejected}, run_id)
        assert db.sql("SELECT raw_value FROM rejected_rows").rows() == [("\x00\x00junk",)]


def test_every_row_of_the_readable_corpus_is_accounted_for():
    readable = [p for p in sorted(HOSTILE.iterdir()) if p not in UNUSABLE]
    assert {p.name for p in readable} == {
        "formula_injection.csv", "vin_spellings.csv", "vin_int64.parquet", "vin_binary.parquet",
        "odd_other_columns.parquet",
    }  # fmt: skip
    for path in readable:
        records = pq.ParquetFile(path).metadata.num_rows if path.suffix == ".parquet" else csv_records(path)
        assert_every_row_accounted(read_fleet([path]), records)


def test_corpus_generator_reproduces_the_committed_bytes(tmp_path, monkeypatch):
    import tests.fixtures.make_awkward_fleets as make

    monkeypatch.setattr(make, "HERE", tmp_path)
    make.write_hostile()
    for made in (tmp_path / "hostile").iterdir():
        if made.suffix != ".parquet":  # Parquet bytes carry the writer's version; their content is tested above
            assert made.read_bytes() == (HOSTILE / made.name).read_bytes(), made.name


def test_a_huge_vin_cell_is_one_short_reject(tmp_path):
    # 10 MB in the VIN cell: rejected as wrong_length and stored cut short, the next row unharmed.
    path = tmp_path / "huge_cell.csv"
    path.write_bytes(b"vin,unit\n" + b" A" * (5 * 1024 * 1024) + f",1\n{V1},2\n".encode())
    result = read_fleet([path])
    assert result.rejected.select("source_row", "reason").rows() == [(1, "wrong_length")]
    raw = result.rejected["raw_value"].item()
    assert raw == " A" * 100 + "… (10485760 characters)"
    assert result.roster["vin"].to_list() == [V1]
    assert_every_row_accounted(result, 2)


def test_the_same_file_named_twice_is_read_once(tmp_path, monkeypatch):
    monkeypatch.chdir(FLEETS)
    result = read_fleet(["crlf.csv", FLEETS / "crlf.csv", "./crlf.csv", str(FLEETS / "crl*.csv")])
    assert result.files.count("crlf.csv") == 1 and str(FLEETS / "crlf.csv") not in result.files
    assert result.roster.filter(pl.col("source_file") == "crlf.csv")["duplicate_count"].to_list() == [0, 0]


def _socket_at(path: Path):
    import socket

    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    return server


@pytest.mark.timeout(60)  # before the check, reading the FIFO waited for a writer for ever
def test_a_fifo_a_device_or_a_socket_is_refused_by_name_without_being_opened(tmp_path):
    import os

    fifo = tmp_path / "fleet.csv"
    os.mkfifo(fifo)
    with pytest.raises(FleetFileError) as caught:
        read_fleet([fifo])
    assert_clear(caught.value, fifo, "a named pipe (FIFO), not a regular file", "save the data to a regular file")
    with pytest.raises(FleetFileError) as caught:
        read_fleet(["/dev/zero"])  # never ends: read whole, it would fill the memory
    assert_clear(caught.value, "/dev/zero", "a character device, not a regular file")
    server = _socket_at(tmp_path / "fleet.sock")
    try:
        with pytest.raises(FleetFileError) as caught:
            read_fleet([tmp_path / "fleet.sock"])
        assert_clear(caught.value, tmp_path / "fleet.sock", "a socket, not a regular file")
    finally:
        server.close()


@pytest.mark.timeout(60)
def test_a_fifo_in_a_folder_or_a_glob_is_listed_as_skipped_never_opened(tmp_path):
    import os
    import shutil

    shutil.copy(FLEETS / "crlf.csv", tmp_path / "good.csv")
    os.mkfifo(tmp_path / "waiting.csv")
    for given in (tmp_path, tmp_path / "*.csv"):
        result = read_fleet([given])
        assert result.files == [str(tmp_path / "good.csv")]
        assert result.skipped_files == [str(tmp_path / "waiting.csv")]
    with pytest.raises(FleetFileError, match="no files match this pattern"):
        read_fleet([tmp_path / "wait*.csv"])


def _with_check_digit(body: str) -> str:
    """`body` (17 characters, position 9 a placeholder) made a valid North American VIN."""
    from fleet_data.tasks.ingest.vins import check_digit

    digit = check_digit(body[:8] + "0" + body[9:])
    assert digit is not None
    return body[:8] + digit + body[9:]


def test_numbers_invisible_and_look_alike_characters_each_get_their_own_reason_and_none_is_accepted(tmp_path):
    """Several values below would be a valid VIN once cleaned up (the old rules stripped zero-width characters
    and a BOM, and upper-cased a long s into S and a ligature into FF: five were accepted); none is a VIN as
    written, and each is named in `rejected_rows` for what it holds."""
    with_s, with_ff = _with_check_digit("1HGCM8S6?3A004352"), _with_check_digit("1HGCMFF6?3A004352")
    forged = {
        f"{V1[:4]}\u200b{V1[4:]}": "invisible_characters",  # zero-width space
        f"{V1[:4]}\u200d{V1[4:]}": "invisible_characters",  # zero-width joiner
        f"\ufeff{V1}": "invisible_characters",  # a BOM pasted in front
        f"{V1[:5]}\u00ad{V1[5:]}": "invisible_characters",  # soft hyphen
        f"{V1}\u200e": "invisible_characters",  # left-to-right mark
        V1.replace("A", "\u0410"): "confusable_characters",  # Cyrillic A
        V1.replace("C", "\u0421"): "confusable_characters",  # Cyrillic Es
        V1.replace("0", "\u039f", 1): "confusable_characters",  # Greek Omicron for a zero
        "\uff11" + V1[1:]: "confusable_characters",  # full-width digit one
        with_s.replace("S", "\u017f"): "confusable_characters",  # long s: upper-cased, an S
        with_ff.replace("FF", "\ufb00"): "confusable_characters",  # the ligature ff: upper-cased, FF
    }
    path = tmp_path / "forged.csv"
    path.write_text("vin,unit\n" + "".join(f"{raw},{i}\n" for i, raw in enumerate(forged, 1)) + f"{V1},ok\n",
                    encoding="utf-8")
    numbers = tmp_path / "numbers.parquet"
    pl.DataFrame({"vin": [11111111111111111, 123, None], "unit": ["a", "b", "c"]}).write_parquet(numbers)
    assert is_valid_vin("11111111111111111")  # as text, a valid VIN
    result = read_fleet([path, numbers])
    reasons = dict(zip(result.rejected["raw_value"].to_list(), result.rejected["reason"].to_list()))
    assert {raw: reasons.get(raw) for raw in forged} == forged
    assert reasons["11111111111111111"] == reasons["123"] == "not_text"
    assert result.roster["vin"].to_list() == [V1] and result.duplicates == 0  # nothing forged joined the roster
    with open_database(tmp_path / "fleet.duckdb") as db:  # as analysts find them
        run_id = db.start_run("refresh", result.files, {})
        db.land_chunk({"vehicles": result.roster, "rejected_rows": result.rejected}, run_id)
        landed = dict(db.sql("SELECT reason, count(*) FROM rejected_rows GROUP BY reason").rows())
    assert landed == {"invisible_characters": 5, "confusable_characters": 6, "not_text": 2, "missing": 1}
