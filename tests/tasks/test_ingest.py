"""read_fleet against the awkward-files corpus, the sample fleet and small row-in/row-out files."""

from pathlib import Path

import polars as pl
import pytest

from fleet_data.tasks.ingest.fleet_files import FleetFileError, read_fleet

ROOT = Path(__file__).resolve().parents[2]
FLEETS = ROOT / "tests" / "fixtures" / "fleets"
SAMPLE = ROOT / "data" / "sample_fleet.csv"
V1, V2, V3, V4 = "1HGCM82633A004352", "1FTFW1E50KFA12345", "5YJ3E1EA2JF000316", "WBA3A5C51CF256651"


def accounted(result) -> None:
    """Every data row is in exactly one place (rows waiting for a plate lookup are one)."""
    assert result.rows_in == result.roster.height + result.duplicates + result.rejected.height + result.plates.height
    assert result.valid == result.roster.height
    assert result.duplicates == result.roster["duplicate_count"].sum()


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_every_reject_reason_row_in_row_out(tmp_path):
    path = write(
        tmp_path,
        "fleet.csv",
        "vin,unit\n"
        f"{V1},ok\n"
        ",missing\n"
        "1HGCM82633A00435,short\n"
        "1HGCM8263IA004352,letter I\n"
        "1HGCM82634A004352,bad digit\n"
        f"{V4},european\n"
        f"{V1.lower()},duplicate\n",
    )
    result = read_fleet([path])
    assert result.rejected.select("source_row", "raw_value", "reason").rows() == [
        (2, None, "missing"),
        (3, "1HGCM82633A00435", "wrong_length"),
        (4, "1HGCM8263IA004352", "invalid_characters"),
        (5, "1HGCM82634A004352", "check_digit"),
    ]
    assert set(result.rejected["source_file"]) == {str(path)}
    assert result.roster.select("vin", "source_row", "unit_number", "check_digit_valid", "duplicate_count").rows() == [
        (V1, 1, "ok", True, 1),
        (V4, 6, "european", False, 0),
    ]
    assert (result.rows_in, result.valid, result.duplicates) == (7, 2, 1)
    accounted(result)


def test_sample_fleet_accounts_for_every_row():
    result = read_fleet([SAMPLE])
    raw_rows = pl.read_csv(SAMPLE, infer_schema=False).height
    assert result.rows_in == raw_rows
    accounted(result)
    assert result.duplicates == 12
    assert set(result.rejected["reason"]) == {"missing", "wrong_length", "invalid_characters", "check_digit"}
    assert result.roster["mileage"].dtype == pl.Int64
    assert result.roster["vin"].str.len_chars().eq(17).all()
    assert result.roster["vin"].is_unique().all()
    # Non-North-American VINs with a "wrong" position 9 are kept and flagged.
    flagged = result.roster.filter(~pl.col("check_digit_valid"))
    assert flagged.height > 0 and not flagged["vin"].str.slice(0, 1).is_in(list("12345")).any()
    # What a first `make demo` shows (tests/fixtures/make_sample_fleet.py): rows with a plate instead of a VIN,
    # vehicles registered outside North America, and a condition column in several spellings.
    assert result.plates.height == 14 and result.plates["plate"].is_not_null().all()
    abroad = result.roster.filter(pl.col("country").is_not_null())
    assert sorted(abroad["country"]) == ["DE", "DE", "GB", "JP", "SE"] and abroad["state"].is_null().all()
    # Read in any spelling, kept as the spec's word; a value the spec does not know is set aside, as written.
    assert set(result.roster["condition"].drop_nulls()) == {"clean", "average", "rough", "excellent"}
    assert result.roster["condition_rejected"].drop_nulls().to_list() == ["like new"]


def test_rows_with_a_plate_and_no_vin_wait_for_a_plate_lookup(tmp_path):
    path = write(
        tmp_path,
        "fleet.csv",
        "vin,plate,state,Registration Country,unit,mileage\n"
        f"{V1},AAA111,TX,,ok,10\n"
        ",BBB 222, tx ,,plate only,\"12,345\"\n"
        ",,TX,,nothing,\n"
        ",CCC333,,DE,plate and country,\n"
        "1HGCM82633A00435,DDD444,TX,,short VIN with a plate,\n"
        ",EEE555,,,plate alone,\n",
    )
    result = read_fleet([path])
    assert result.plates.select("source_row", "plate", "state", "country", "unit_number", "mileage").rows() == [
        (2, "BBB 222", "TX", None, "plate only", 12345),
        (4, "CCC333", None, "DE", "plate and country", None),
        (6, "EEE555", None, None, "plate alone", None),  # tasks/ingest/plates.py says why it cannot be looked up
    ]
    assert "vin" not in result.plates.columns and "reason" not in result.plates.columns
    # A VIN cell that holds something is the user's VIN: it is checked, never replaced by a plate lookup.
    assert result.rejected.select("source_row", "reason").rows() == [(3, "missing"), (5, "wrong_length")]
    assert result.summary()["plate_rows"] == 3
    accounted(result)


def test_a_file_of_plates_and_states_needs_no_vin_column(tmp_path):
    path = write(tmp_path, "plates.csv", "Licence Plate,Province,Unit\nABC123,ON,1\nXYZ9,TX,2\n")
    result = read_fleet([path])
    assert result.plates.select("source_row", "plate", "state").rows() == [(1, "ABC123", "ON"), (2, "XYZ9", "TX")]
    assert result.roster.height == 0 and result.rejected.height == 0
    accounted(result)
    with pytest.raises(FleetFileError, match="no VIN column found.*a state or country column"):
        read_fleet([write(tmp_path, "plates_only.csv", "unit,plate\n1,ABC\n")])


def test_a_fleet_without_plate_only_rows_says_nothing_of_plates():
    assert "plate_rows" not in read_fleet([FLEETS / "crlf.csv"]).summary()


def test_sample_parquet_reads_like_csv():
    result = read_fleet([ROOT / "data" / "sample_fleet.parquet"])
    accounted(result)
    assert result.roster["mileage"].dtype == pl.Int64


@pytest.mark.parametrize(
    "name,valid,rejected,columns",
    [
        ("semicolon_latin1.csv", [V1, V4], [], {"unit_number", "plate", "mileage"}),
        ("semicolon_bom_utf8.csv", [V2], [(2, "check_digit")], {"unit_number", "state"}),
        ("tab_separated.tsv", [V3, V1], [], {"unit_number", "state", "mileage"}),
        ("crlf.csv", [V1, V2], [], {"unit_number"}),
        ("quoted_multiline.csv", [V1, V2, V3], [], {"notes"}),
        ("vehicle_vin_header.csv", [V4, V1], [], {"fleet", "plate"}),
        ("vin_number_header.csv", [V2], [], {"mileage"}),
        ("blank_lines.csv", [V1, V2], [], {"unit_number"}),
        ("fleet.parquet", [V1, V4], [(3, "wrong_length")], {"unit_number", "mileage"}),
        ("utf16_excel_unicode.txt", [V1], [], {"unit_number"}),
    ],
)
def test_awkward_files(name, valid, rejected, columns):
    result = read_fleet([FLEETS / name])
    assert result.roster["vin"].to_list() == valid
    assert result.rejected.select("source_row", "reason").rows() == rejected
    assert columns <= set(result.roster.columns)
    accounted(result)


def test_awkward_values_survive():
    latin = read_fleet([FLEETS / "semicolon_latin1.csv"]).roster
    assert latin["plate"].to_list() == ["AB-123-CD", "ÉÉ-999"]
    assert latin["mileage"].to_list() == [12345, None]
    quoted = read_fleet([FLEETS / "quoted_multiline.csv"]).roster
    assert quoted["notes"].to_list() == ["front bumper, scratched", "line one\nline two", 'said "ok"']
    assert quoted["source_row"].to_list() == [1, 2, 3]
    tab = read_fleet([FLEETS / "tab_separated.tsv"]).roster
    assert tab["mileage"].to_list() == [1234, None]  # "abc" is not a mileage; the VIN still lands
    bom = read_fleet([FLEETS / "semicolon_bom_utf8.csv"]).roster
    assert bom["state"].to_list() == ["TX"]


def test_blank_lines_are_counted_not_rows():
    result = read_fleet([FLEETS / "blank_lines.csv"])
    assert result.blank_rows == 2
    assert result.rows_in == 2
    # Row numbers count every record after the header, blank ones included.
    assert result.roster["source_row"].to_list() == [1, 3]


def test_duplicates_in_other_spellings_collapse_keeping_first():
    result = read_fleet([FLEETS / "vin_number_header.csv"])
    assert result.roster.select("vin", "mileage", "duplicate_count").rows() == [(V2, 100, 1)]
    accounted(result)


def test_folder_of_mixed_files_and_glob():
    result = read_fleet([FLEETS / "mixed_folder"])
    assert len(result.files) == 2
    assert result.skipped_files == [str(FLEETS / "mixed_folder" / "README.md")]
    # V2 is in both files: one roster row, first file's columns, one duplicate collapsed.
    assert result.roster.select("vin", "unit_number", "fleet", "duplicate_count").rows() == [
        (V1, "A", None, 0),
        (V2, "B", None, 1),
        (V3, "D", "y", 0),
    ]
    assert result.roster.filter(pl.col("vin") == V3)["source_file"].item() == str(FLEETS / "mixed_folder" / "part2.parquet")
    accounted(result)
    globbed = read_fleet([str(FLEETS / "mixed_folder" / "*.csv")])
    assert globbed.files == [str(FLEETS / "mixed_folder" / "part1.csv")]


def test_vin_column_option(tmp_path):
    path = write(tmp_path, "f.csv", f"serial,other_vin_guess\n{V1},x\n")
    with pytest.raises(FleetFileError, match="no VIN column|several"):
        read_fleet([write(tmp_path, "g.csv", f"serial\n{V1}\n")])
    result = read_fleet([path], vin_column="Serial")
    assert result.roster["vin"].to_list() == [V1]
    with pytest.raises(FleetFileError, match="no column named 'chassis'"):
        read_fleet([path], vin_column="chassis")


def test_ambiguous_vin_columns(tmp_path):
    path = write(tmp_path, "two.csv", f"vin,VIN number\n{V1},{V2}\n")
    with pytest.raises(FleetFileError, match="several columns look like VINs"):
        read_fleet([path])


@pytest.mark.parametrize(
    "name,problem",
    [
        ("empty.csv", "file is empty"),
        ("header_only.csv", "has a header but no data rows"),
        ("no_vin_column.csv", "no VIN column found"),
        ("not_a_fleet.xlsx", "not a CSV or Parquet file"),
    ],
)
def test_unusable_files_stop_with_one_clear_message(name, problem):
    with pytest.raises(FleetFileError) as caught:
        read_fleet([FLEETS / name])
    assert str(FLEETS / name) in str(caught.value)
    assert problem in str(caught.value)


def test_one_unusable_file_stops_the_whole_read(tmp_path):
    # Nothing comes back (so nothing can be written) when any file of the set is unusable.
    with pytest.raises(FleetFileError, match="no_vin_column.csv"):
        read_fleet([FLEETS / "crlf.csv", FLEETS / "no_vin_column.csv"])


def test_missing_paths(tmp_path):
    with pytest.raises(FleetFileError, match="file not found"):
        read_fleet([tmp_path / "nope.csv"])
    with pytest.raises(FleetFileError, match="no files match"):
        read_fleet([str(tmp_path / "*.csv")])
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(FleetFileError, match="folder holds no CSV or Parquet"):
        read_fleet([tmp_path / "empty_dir"])


def test_fake_parquet_and_bad_csv(tmp_path):
    fake = tmp_path / "fake.parquet"
    fake.write_bytes(b"vin\n" + V1.encode())
    with pytest.raises(FleetFileError, match="not a Parquet file"):
        read_fleet([fake])
    ragged = write(tmp_path, "ragged.csv", f'vin,unit\n{V1},"unterminated\n')
    with pytest.raises(FleetFileError, match="ragged.csv"):
        read_fleet([ragged])


def test_header_and_blank_lines_only_is_unusable(tmp_path):
    path = write(tmp_path, "blank.csv", "vin,unit\n\n,\n  ,  \n")
    with pytest.raises(FleetFileError, match="has a header but no data rows"):
        read_fleet([path])


def _mixed_fleet(rows: int) -> str:
    """Valid, duplicate, rejected, blank, plate-only and multi-line quoted rows, spread over the file."""
    vins = [V1, V2, V3, V4]
    lines = ["VIN,Unit,Plate,State,Mileage,Depot"]
    for i in range(1, rows + 1):
        if i % 97 == 0:
            lines.append("")  # a blank line keeps its number
        elif i % 13 == 0:
            lines.append(f"1HGCM82634A{i:06d},bad{i},,,,")  # wrong check digit
        elif i % 31 == 0:
            lines.append(f",plate{i},P{i},tx,,")  # a plate, no VIN: waits for a lookup
        elif i % 41 == 0:
            lines.append(f'{vins[i % 4].lower()},dup{i},,,"12,345 km","Yard {i}\nsecond line"')  # quoted line break
        else:
            lines.append(f"WBA3A5C5{i:09d},u{i},,,{i},Depot {i % 5}")  # European: the check digit is advisory
    return "\n".join(lines) + "\n"


def test_a_csv_is_read_in_slices_with_the_same_rows_as_whole(tmp_path, monkeypatch):
    """A large fleet is never held whole: rows are read and checked slice by slice, and the result (roster, line
    numbers, duplicates, rejected rows, plate rows) is the one of reading the file in one piece."""
    import fleet_data.tasks.ingest.fleet_files as ingest

    path = write(tmp_path, "fleet.csv", _mixed_fleet(1000))
    whole = read_fleet([path])  # far under the default slice: one slice
    seen: list[int] = []
    process = ingest._process_slice

    def spy(frame, *args, **kwargs):
        seen.append(frame.height)
        return process(frame, *args, **kwargs)

    monkeypatch.setattr(ingest, "SLICE_ROWS", 64)
    monkeypatch.setattr(ingest, "_process_slice", spy)
    monkeypatch.setattr(ingest, "_read_csv", None)  # a UTF-8 file is never read whole
    sliced = read_fleet([path])
    assert len(seen) >= 1000 // 64 and max(seen) <= 64 and sum(seen) == 1000 - 10  # the 10 blank lines are counted apart
    assert sliced.summary() == whole.summary()
    assert sliced.roster.equals(whole.roster) and sliced.roster.columns == whole.roster.columns
    assert sliced.rejected.equals(whole.rejected) and sliced.plates.equals(whole.plates)
    # Line numbers run on across slices: row 988 is the 988th record (the 13th row that fails its check digit, ...).
    assert sliced.rejected.filter(pl.col("source_row") == 988)["reason"].to_list() == ["check_digit"]
    assert sliced.plates.filter(pl.col("source_row") == 992)["plate"].to_list() == ["P992"]
    assert (sliced.blank_rows, sliced.duplicates) == (10, whole.duplicates) and whole.duplicates > 10
    accounted(sliced)


def test_files_in_slices_keep_every_column_of_every_file(tmp_path, monkeypatch):
    """Files with different columns, read in slices: roster, plates and rejected rows as when read whole."""
    import fleet_data.tasks.ingest.fleet_files as ingest

    first = write(tmp_path, "a.csv", _mixed_fleet(300))
    second = write(tmp_path, "b.csv", f"vin,colour\n{V2},red\n,blue\n{V3},green\n" * 40)
    whole = read_fleet([first, second])
    monkeypatch.setattr(ingest, "SLICE_ROWS", 16)
    sliced = read_fleet([first, second])
    assert sliced.summary() == whole.summary()
    assert sliced.roster.equals(whole.roster) and sliced.roster.columns == whole.roster.columns
    assert sliced.rejected.equals(whole.rejected)
    assert sliced.plates.equals(whole.plates) and sliced.plates.columns == whole.plates.columns


def test_a_parquet_file_is_read_in_slices_with_the_same_rows_as_whole(tmp_path, monkeypatch):
    import fleet_data.tasks.ingest.fleet_files as ingest

    csv = write(tmp_path, "fleet.csv", _mixed_fleet(600))
    path = tmp_path / "fleet.parquet"
    pl.read_csv(csv, infer_schema=False).write_parquet(path, row_group_size=100)
    whole = read_fleet([path])
    seen: list[int] = []
    process = ingest._process_slice
    monkeypatch.setattr(ingest, "SLICE_ROWS", 50)
    monkeypatch.setattr(ingest, "_read_parquet", None)  # never read whole
    monkeypatch.setattr(ingest, "_process_slice", lambda frame, pieces, **kw: (seen.append(frame.height), process(frame, pieces, **kw)))
    sliced = read_fleet([path])
    assert len(seen) >= 600 // 50 and max(seen) <= 50
    assert sliced.summary() == whole.summary()
    assert sliced.roster.equals(whole.roster) and sliced.rejected.equals(whole.rejected)
    assert sliced.plates.equals(whole.plates)


@pytest.mark.parametrize("header", ["vin,unit", "a,b"])
def test_a_row_that_breaks_the_parse_after_many_slices_is_named_as_when_read_whole(tmp_path, monkeypatch, header):
    import fleet_data.tasks.ingest.fleet_files as ingest

    monkeypatch.setattr(ingest, "SLICE_ROWS", 16)
    path = write(tmp_path, "late.csv", header + "\n" + f"{V1},u\n" * 300 + f"{V1},a,b\n{V1},z\n")
    with pytest.raises(FleetFileError, match=r"cannot be parsed as CSV \(row 301 has 3 fields, the header 2\)"):
        read_fleet([path])
