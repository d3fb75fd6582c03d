"""Read fleet files (CSV in any common dialect, Parquet, folders and globs) into a roster.

`read_fleet` is the one entry point. Every data row of every file ends in exactly
one place: the roster (first occurrence of a valid VIN), a collapsed duplicate
(counted on the roster row), `rejected` with its reason, or `plates`: a row with an
empty VIN cell but a plate, whose VIN is looked up by plate (tasks/ingest/plates.py). A file
of plates and states needs no VIN column at all. A file that cannot be
used at all raises `FleetFileError` naming the file and the problem, before any
result exists, so nothing is written downstream.

Row numbers (`source_row`) are 1-based data rows as a user sees them in the file:
the first record after the header is row 1. Blank lines keep their number (so
row N is still record N) but are not data: they are counted in `blank_rows` and
are not part of `rows_in`.
"""

from __future__ import annotations

import codecs
import csv
import glob as globbing
import io
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from fleet_data.tasks.errors import UsageError
from fleet_data.tasks.control import memory
from fleet_data.tasks.ingest.file_kind import not_regular
from fleet_data.tasks.ingest.vins import MISSING, NOT_TEXT, WRONG_LENGTH, normalise_vin_expr, vin_reject_reason_expr, with_check_digit_valid

CSV_SUFFIXES = {".csv", ".tsv", ".txt", ".tab"}
PARQUET_SUFFIXES = {".parquet", ".pq"}
CANDIDATE_DELIMITERS = (",", ";", "\t", "|")
SNIFF_BYTES = 64 * 1024
# Rows of a fleet file read and checked at a time: a file of millions of rows is never held whole, only its
# roster (and rejected rows) grow with it.
SLICE_ROWS = 250_000
SCAN_BLOCK = 4 << 20  # bytes read at a time by the pass that checks a CSV's encoding and quotes
# Control characters other than tab, line feed, carriage return and form feed never occur in a text
# export; more than a few in the first 64 KB means a binary file with a .csv name.
_CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")
BINARY_SIGNATURES = {
    b"PK\x03\x04": "an Excel workbook or other ZIP archive",
    b"\xd0\xcf\x11\xe0": "an old Excel (.xls) workbook",
    b"\x89PNG": "a PNG image",
    b"%PDF": "a PDF document",
    b"\x1f\x8b": "a gzip archive",
}
EXPORT_HINT = "export the fleet as CSV (UTF-8) or Parquet"

# Header names (lower case, letters and digits only) that mean "this is the VIN".
VIN_HEADER_NAMES = {
    "vin", "vins", "vinnumber", "vinno", "vincode", "vehiclevin", "vehiclevinnumber",
    "vehicleidentificationnumber", "vehicleidentification", "chassisnumber", "chassisvin",
}  # fmt: skip

# Mileage headers that say the figures are kilometres (any other mileage header: miles, unless a cell says km).
KM_HEADERS = {"km", "kms", "kilometrage", "kilometerstand", "kilometres", "kilometers", "odometerkm", "odometerkms",
              "mileagekm", "kmdriven", "currentkm", "odometerkilometres", "odometerkilometers"}

# Roster columns the pipeline uses, and the header spellings that mean them.
ROSTER_ALIASES = {
    "unit_number": {"unit", "unitnumber", "unitno", "unitid", "asset", "assetid", "assetnumber", "fleetnumber", "unite"},
    "plate": {"plate", "platenumber", "licenseplate", "licenceplate", "license", "registration", "regnumber", "reg",
              "plaque", "immatriculation", "kennzeichen", "matricula"},
    "state": {"state", "platestate", "registrationstate", "licensestate", "province", "stateprovince"},
    "country": {"country", "countrycode", "registrationcountry", "platecountry", "pays"},  # where it is registered
    "mileage": {"mileage", "miles", "odometer", "odometerreading", "odometermiles", "currentmileage", "mileagemi",
                "mileagemiles", "odometermi"} | KM_HEADERS,
    "fleet": {"fleet", "fleetname", "division", "depot"},
    "condition": {"condition", "vehiclecondition", "conditiongrade", "grade", "vehiclegrade", "conditionrating"},
}

ROSTER_LEADING = ["vin", "source_file", "source_row", "unit_number", "plate", "state", "mileage", "mileage_unit",
                  "condition", "fleet"]
# The values /v2/marketvalue takes for `condition`; a cell is matched ignoring case and spaces.
CONDITIONS = ("excellent", "clean", "average", "rough")
RAW_VALUE_LIMIT = 200  # characters of a rejected VIN cell kept in rejected_rows
REJECTED_SCHEMA = {"source_file": pl.String, "source_row": pl.Int64, "raw_value": pl.String, "reason": pl.String}


class FleetFileError(UsageError):
    """A fleet file cannot be used at all; the message names the file and the problem."""

    def __init__(self, path: Path | str, problem: str):
        self.path = str(path)
        # One line, whatever the file held: the message is printed as is by the command line.
        self.problem = _one_line(problem, limit=600)
        super().__init__(f"{_one_line(self.path, limit=300)}: {self.problem}")


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _column_list(columns: list[str], shown: int = 8) -> str:
    """Column names for a message: a file with a 100 MB header must not give a 100 MB error."""
    if not columns:
        return "none"
    names = [repr(_one_line(c, limit=40)) if c != _one_line(c, limit=40) or not c.strip() else c for c in columns[:shown]]
    more = f" and {len(columns) - shown} more" if len(columns) > shown else ""
    return ", ".join(names) + more


def _polars_problem(exc: BaseException) -> str:
    text = str(exc).strip()
    return _one_line(text.splitlines()[0] if text else type(exc).__name__)


@dataclass
class IngestResult:
    roster: pl.DataFrame
    rejected: pl.DataFrame
    files: list[str]
    rows_in: int
    valid: int
    duplicates: int
    blank_rows: int = 0
    skipped_files: list[str] = field(default_factory=list)
    # Rows with an empty VIN cell and a plate: their VIN is to be looked up (tasks/ingest/plates.py).
    plates: pl.DataFrame = field(default_factory=pl.DataFrame)

    @property
    def rejected_count(self) -> int:
        return self.rejected.height

    # `rejected` is the frame; the count the issue names is exposed under both spellings.
    @property
    def rejected_rows(self) -> int:
        return self.rejected.height

    def summary(self) -> dict[str, int]:
        counts = {
            "rows_in": self.rows_in,
            "valid": self.valid,
            "duplicates": self.duplicates,
            "rejected": self.rejected.height,
            "blank_rows": self.blank_rows,
            "files": len(self.files),
        }
        if self.plates.height:  # rows_in = valid + duplicates + rejected + plate_rows until they are looked up
            counts["plate_rows"] = self.plates.height
        return counts


def _ascii(name: str) -> str:
    # "Kilométrage" and "Unité" should match like "kilometrage" and "unite".
    return unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii").lower()


def _header_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", _ascii(name))


def _snake(name: str) -> str:
    snake = re.sub(r"[^a-z0-9]+", "_", _ascii(name).strip()).strip("_")
    return snake or "column"


def expand_paths(paths: Sequence[str | Path] | str | Path) -> tuple[list[Path], list[str]]:
    """Files to read, in a stable order, and files skipped inside folders (not CSV/Parquet)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[Path] = []
    skipped: list[str] = []
    for item in paths:
        text = str(item)
        path = Path(text)
        if path.is_dir():
            for child in sorted(p for p in path.iterdir() if not p.name.startswith(".") and not p.is_dir()):
                if child.is_file() and child.suffix.lower() in CSV_SUFFIXES | PARQUET_SUFFIXES:
                    files.append(child)
                else:  # a FIFO, a device or a socket among them is listed, never opened
                    skipped.append(str(child))
            if not any(f.parent == path for f in files):
                raise FleetFileError(path, "folder holds no CSV or Parquet files: point at the fleet file itself or put it there")
        elif path.exists():
            if problem := not_regular(path):  # opened, a FIFO would wait for a writer for ever
                raise FleetFileError(path, problem)
            files.append(path)
        elif globbing.has_magic(text):
            found = sorted(Path(p) for p in globbing.glob(text, recursive=True) if not Path(p).is_dir())
            matched = [p for p in found if p.is_file()]
            skipped += [str(p) for p in found if not p.is_file()]
            if not matched:
                raise FleetFileError(text, "no files match this pattern: check the pattern and the folder")
            files.extend(matched)
        else:
            raise FleetFileError(path, "file not found: check the path")
    # The same file named twice (folder + glob, relative + absolute, a link) is read once: read twice, its
    # every row would come back as a duplicate of itself.
    unique = list({_same_file(f): f for f in reversed(files)}.values())[::-1]
    return unique, skipped


def _same_file(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: leave it to the read to report
        return path


def _decode(raw: bytes, path: Path) -> bytes:
    """UTF-8 bytes without BOM; UTF-16 (Excel 'Unicode text') and cp1252/latin-1 are converted."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError as exc:
            raise FleetFileError(path, f"unreadable UTF-16 text ({exc.reason}): save it again as CSV (UTF-8)") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    if b"\x00" in raw[:SNIFF_BYTES]:
        raise FleetFileError(path, f"not a CSV or Parquet file (binary content): {EXPORT_HINT}")
    if _is_utf8(raw):
        return raw
    try:
        return raw.decode("cp1252").encode("utf-8")
    except UnicodeDecodeError:
        # latin-1 maps every byte, so this cannot fail; cp1252 is tried first for € and quotes.
        return raw.decode("latin-1").encode("utf-8")


def _is_utf8(raw: bytes, block: int = 1 << 20) -> bool:
    """Validate in blocks so a large file is not copied into one big str."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for start in range(0, len(raw), block):
            decoder.decode(raw[start : start + block])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _first_line(text: bytes) -> str:
    for line in text[:SNIFF_BYTES].splitlines():
        if line.strip():
            return line.decode("utf-8", errors="replace")
    return ""


def _sniff_delimiter(header: str) -> str:
    unquoted = re.sub(r'"[^"]*"', "", header)
    counts = {d: unquoted.count(d) for d in CANDIDATE_DELIMITERS}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] > 0 else ","


EMPTY = "file is empty: a fleet file needs a header row with a VIN column, then one vehicle per row"
NO_ROWS = "has a header but no data rows: add one vehicle per row under the header"


def _check_head(head: bytes, size: int, path: Path) -> None:
    """Refuse what the first 64 KB already show is no CSV, before reading the whole file."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return  # UTF-16 text: NUL bytes are expected, _decode converts it
    for signature, kind in BINARY_SIGNATURES.items():
        if head.startswith(signature):
            raise FleetFileError(path, f"not a CSV or Parquet file ({kind}): {EXPORT_HINT}")
    if b"\x00" in head or len(_CONTROL_BYTES.findall(head)) > max(8, len(head) // 1000):
        raise FleetFileError(path, f"not a CSV or Parquet file (binary content): {EXPORT_HINT}")
    body = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if size > len(head) and body and not re.search(rb"[\r\n]", body):
        raise FleetFileError(
            path,
            f"no line break in the first {SNIFF_BYTES // 1024} KB of a {size:,}-byte file: not a fleet CSV "
            "(expected a header row, then one vehicle per line); check the file is the fleet export",
        )


def _read_csv(path: Path) -> pl.DataFrame:
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(SNIFF_BYTES)
        _check_head(head, size, path)
        raw = path.read_bytes()
    except OSError as exc:
        raise FleetFileError(path, f"unreadable ({exc.strerror or exc}): check the path and its permissions") from None
    if not raw.strip():
        raise FleetFileError(path, EMPTY)
    text = _decode(raw, path)
    del raw
    header = _first_line(text)
    if not header:
        raise FleetFileError(path, EMPTY)
    # Blank lines before the header are not rows; polars would take the first one as the header.
    leading_blank = re.match(rb"(?:[ \t]*\r?\n)+", text)
    start = leading_blank.end() if leading_blank else 0
    separator = _sniff_delimiter(header)
    try:
        frame = pl.read_csv(
            text[start:] if start else text,
            separator=separator,
            infer_schema=False,
            quote_char='"',
            raise_if_empty=False,
        )
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
        where = _first_bad_row(text[start:], separator) or _polars_problem(exc)
        raise FleetFileError(
            path, f"cannot be parsed as CSV ({where}): check the delimiter, and that every row has "
            "as many fields as the header and closes its quotes",
        ) from None
    if text.count(b'"') % 2:  # an odd number of quotes: one may have swallowed the rows after it
        unclosed = _unclosed_quote(text)
        if unclosed:
            line, column = unclosed
            raise FleetFileError(
                path, f'a quote (") opened in line {line}, column {column} is never closed, so every line after it '
                "reads as part of one field: close the quote or remove it (a quote inside a field is written \"\")",
            )
    return frame


def _csv_slices(path: Path) -> tuple[list[str], Iterator[pl.DataFrame]]:
    """A CSV's header and its rows, SLICE_ROWS at a time, as `_read_csv` reads them whole.

    A UTF-8 file (the usual export) is scanned by polars from the disk, so neither its bytes nor all its
    rows are ever held at once. Any other file (UTF-16, cp1252, an odd number of quotes, one polars cannot
    scan) is read whole by `_read_csv`, which gives the same rows, or the same error.
    """
    plain = _plain_utf8(path)
    if plain is not None:
        skip, separator = plain
        scan = pl.scan_csv(path, separator=separator, infer_schema=False, quote_char='"', raise_if_empty=False,
                           skip_lines=skip, glob=False)
        try:
            columns = scan.collect_schema().names()
        except (pl.exceptions.PolarsError, pl.exceptions.PanicException):
            pass  # read whole below: its error names the row
        else:
            return columns, _scanned_slices(path, scan)
    frame = _read_csv(path)
    return frame.columns, frame.iter_slices(SLICE_ROWS)


def _scanned_slices(path: Path, scan: pl.LazyFrame) -> Iterator[pl.DataFrame]:
    try:
        yield from scan.collect_batches(chunk_size=SLICE_ROWS)
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
        _read_csv(path)  # a file that does not parse: reading it whole gives the error that names the row
        raise FleetFileError(path, f"cannot be parsed as CSV ({_polars_problem(exc)}): check the delimiter, and "
                                   "that every row has as many fields as the header and closes its quotes") from None


def _plain_utf8(path: Path) -> tuple[int, str] | None:
    """(blank lines before the header, separator) of a CSV polars can scan as it lies on the disk: UTF-8 (a BOM
    allowed), with text in it and an even number of quotes. None for any other file, or one that cannot be
    read: `_read_csv` reads it whole, and says why when it cannot be used.

    One pass over the file in blocks, before any row is parsed; refuses what the first 64 KB show is no CSV.
    """
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(SNIFF_BYTES + 3)
            _check_head(head[:SNIFF_BYTES], size, path)
            text = head[3:] if head.startswith(b"\xef\xbb\xbf") else head
            if head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in text[:SNIFF_BYTES]:
                return None
            decoder = codecs.getincrementaldecoder("utf-8")()
            quotes, has_text, block = 0, False, head
            while block:
                if not block.isascii() or decoder.getstate()[0]:  # ASCII is UTF-8: only other blocks are decoded
                    decoder.decode(block)
                quotes += block.count(b'"')
                has_text = has_text or bool(block.strip())
                block = handle.read(SCAN_BLOCK)
            decoder.decode(b"", final=True)
    except (OSError, UnicodeDecodeError):
        return None
    header = _first_line(text)
    if quotes % 2 or not has_text or not header:
        return None
    leading_blank = re.match(rb"(?:[ \t]*\r?\n)+", text)
    return (leading_blank.group().count(b"\n") if leading_blank else 0), _sniff_delimiter(header)


def _unclosed_quote(text: bytes) -> tuple[int, int] | None:
    """Line and column (1-based, in characters) of a quote left open with lines after it; None if there is none.

    Quotes toggle as the CSV reader sees them (an escaped "" toggles twice). Only run when a file holds an
    odd number of quotes, which is rare: a Python loop over its quotes is fine then.
    """
    opened = None
    for match in re.finditer(rb'"', text):
        opened = None if opened is not None else match.start()
    if opened is None or not text[opened:].rstrip(b"\r\n").count(b"\n"):
        return None  # nothing after it on another line: no row was lost
    line_start = text.rfind(b"\n", 0, opened) + 1
    return text.count(b"\n", 0, opened) + 1, len(text[line_start:opened].decode("utf-8", "replace")) + 1


def _first_bad_row(text: bytes, separator: str) -> str:
    """Which data row polars stumbled on, in the user's terms; only run once a read has failed."""
    reader = csv.reader(io.StringIO(text.decode("utf-8", "replace"), newline=""), delimiter=separator, strict=True)
    row = 0
    try:
        width = len(next(reader))
        for row, record in enumerate(reader, 1):
            if len(record) > width:
                return f"row {row} has {len(record)} fields, the header {width}"
    except csv.Error as exc:
        if "end of data" in str(exc):
            return f"a quote opened in row {row + 1} is never closed"
        return f"row {row + 1}: {_one_line(str(exc))}"
    except StopIteration:
        pass
    return ""


def _read_parquet(path: Path) -> pl.DataFrame:
    """The file's columns with their own types; `_as_text` lines them up with CSV columns."""
    try:
        return pl.read_parquet(path)
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError) as exc:
        raise FleetFileError(
            path, f"unreadable Parquet file ({_polars_problem(exc)}): write it again, or {EXPORT_HINT}"
        ) from None


def _parquet_slices(path: Path) -> tuple[list[str], Iterator[pl.DataFrame]]:
    """A Parquet file's columns and its rows, SLICE_ROWS at a time (row group by row group); a file polars
    cannot scan is read whole by `_read_parquet`, whose error says why."""
    try:
        scan = pl.scan_parquet(path, glob=False)
        columns = scan.collect_schema().names()
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError):
        frame = _read_parquet(path)
        return frame.columns, frame.iter_slices(SLICE_ROWS)
    return columns, _scanned_parquet(path, scan)


def _scanned_parquet(path: Path, scan: pl.LazyFrame) -> Iterator[pl.DataFrame]:
    try:
        yield from scan.collect_batches(chunk_size=SLICE_ROWS)
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError) as exc:
        _read_parquet(path)  # the error reading it whole gives
        raise FleetFileError(path, f"unreadable Parquet file ({_polars_problem(exc)}): write it again, or {EXPORT_HINT}") from None


NESTED = (pl.List, pl.Array, pl.Struct)


def _text_column(series: pl.Series) -> pl.Series:
    """One column as text, as it would read from a CSV: nested values as JSON, bytes decoded as UTF-8."""
    dtype = series.dtype
    if dtype == pl.String:
        return series
    if dtype == pl.Binary:
        # Some writers store text as plain bytes; undecodable bytes show as U+FFFD rather than vanish.
        return pl.Series(series.name, [None if b is None else b.decode("utf-8", "replace") for b in series], pl.String)
    if isinstance(dtype, NESTED):
        try:
            # json_encode works on structs: wrap the value as {"v": ...} and keep the part after '{"v":'.
            encoded = series.to_frame("v").select(pl.struct("v").struct.json_encode()).to_series().str.slice(5)
            encoded = encoded.str.head(-1)
            return pl.Series(series.name, encoded).replace("null", None)
        except pl.exceptions.PolarsError:
            pass
    try:
        return series.cast(pl.String, strict=False)
    except pl.exceptions.PolarsError:
        return pl.Series(series.name, [None if v is None else str(v) for v in series], pl.String)


TEXT_TYPES = (pl.String, pl.Binary, pl.Categorical, pl.Enum, pl.Null)  # a VIN column of any other type holds no VIN


def _holds_no_text(dtype: pl.DataType) -> bool:
    """A typed file's VIN column of numbers, dates or booleans (a CSV's columns are all text)."""
    return not isinstance(dtype, NESTED) and not any(dtype == kind or isinstance(dtype, kind) for kind in TEXT_TYPES)


def _as_text(frame: pl.DataFrame, path: Path, vin_name: str) -> pl.DataFrame:
    """Every column as text, so Parquet and CSV rows validate alike; a nested VIN column is refused."""
    vin_type = frame.schema[vin_name]
    if isinstance(vin_type, NESTED):
        kind = "records" if isinstance(vin_type, pl.Struct) else "lists"
        raise FleetFileError(
            path, f"the VIN column {vin_name!r} holds {kind} ({vin_type}), not text: write one VIN per row as text"
        )
    if all(dtype == pl.String for dtype in frame.schema.values()):
        return frame
    return pl.DataFrame([_text_column(frame[name]) for name in frame.columns])


def _is_parquet(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == b"PAR1"
    except OSError:
        return False


def _slices(path: Path) -> tuple[list[str], Iterator[pl.DataFrame]]:
    """A fleet file's columns and its rows, SLICE_ROWS at a time."""
    if _is_parquet(path):
        return _parquet_slices(path)
    if path.suffix.lower() in PARQUET_SUFFIXES:
        raise FleetFileError(path, "not a Parquet file (missing PAR1 magic): write it again as Parquet, or name it .csv if it is CSV")
    return _csv_slices(path)


def find_vin_column(columns: list[str], path: Path | str, vin_column: str | None = None) -> str:
    """The column holding VINs: `vin_column` if given, else by name (case and spacing insensitive)."""
    if vin_column is not None:
        wanted = _header_key(vin_column)
        for name in columns:
            if name == vin_column or _header_key(name) == wanted:
                return name
        raise FleetFileError(path, f"no column named {vin_column!r} (columns: {_column_list(columns)}); check --vin-column")
    exact = [name for name in columns if _header_key(name) in VIN_HEADER_NAMES]
    if len(exact) == 1:
        return exact[0]
    # Headers such as "VIN (17 chars)" or "Vehicle VIN #": a word "vin" anywhere.
    loose = exact or [name for name in columns if "vin" in re.split(r"[^a-z0-9]+", name.lower())]
    if len(loose) == 1:
        return loose[0]
    if not loose:
        raise FleetFileError(
            path, f"no VIN column found (columns: {_column_list(columns)}); name it VIN or pass --vin-column"
        )
    raise FleetFileError(path, f"several columns look like VINs ({_column_list(loose)}); pass --vin-column")


def _roster_names(columns: list[str], vin_name: str) -> dict[str, str]:
    """Rename map: VIN column to `raw_vin`, known roster columns to their canonical names, others to snake_case."""
    renames: dict[str, str] = {vin_name: "raw_vin"}
    taken = {"raw_vin", "vin", "source_file", "source_row", "check_digit_valid", "duplicate_count"}
    for name in columns:
        if name == vin_name:
            continue
        key = _header_key(name)
        canonical = next((c for c, aliases in ROSTER_ALIASES.items() if key in aliases or key == _header_key(c)), None)
        base = canonical if canonical and canonical not in taken else _snake(name)
        target, n = base, 1
        while target in taken:
            n += 1
            target = f"{base}_{n}"
        taken.add(target)
        renames[name] = target
    return renames


NO_VIN_COLUMN = "\x00no VIN column"  # stands in for the VIN column of a file of plates (no header is named so)


def _roles(columns: list[str]) -> set[str]:
    """The roster columns (plate, state, country...) a file's headers name."""
    keys = {_header_key(c) for c in columns}
    return {role for role, aliases in ROSTER_ALIASES.items() if keys & (aliases | {_header_key(role)})}


def _find_vin_or_plates(columns: list[str], path: Path, vin_column: str | None) -> str:
    """The VIN column; a file without one but with plate and state (or country) columns is a file of plates."""
    try:
        return find_vin_column(columns, path, vin_column)
    except FleetFileError as exc:
        roles = _roles(columns)
        if vin_column is None and "plate" in roles and roles & {"state", "country"} and "no VIN column" in exc.problem:
            return NO_VIN_COLUMN
        if vin_column is None and "plate" in roles and "no VIN column" in exc.problem:
            raise FleetFileError(path, f"{exc.problem} (a file of plates needs a state or country column too)") from None
        raise


@dataclass
class _Pieces:
    """What the slices of every file leave, in file and row order, each row in one list."""
    templates: list[pl.DataFrame] = field(default_factory=list)  # each file's columns, no rows
    accepted: list[pl.DataFrame] = field(default_factory=list)  # valid VINs, duplicates not collapsed yet
    rejected: list[pl.DataFrame] = field(default_factory=list)
    plates: list[pl.DataFrame] = field(default_factory=list)  # empty VIN cell, a plate: looked up later
    rows_in: int = 0
    blank_rows: int = 0


def _read_file(path: Path, vin_column: str | None, pieces: _Pieces) -> None:
    """One file's data rows, slice by slice, into `pieces`; blank lines are counted, not rows, but keep their
    number (`source_row` runs on across slices)."""
    columns, slices = _slices(path)
    try:
        if not columns:
            raise FleetFileError(path, EMPTY)
        vin_name = _find_vin_or_plates(columns, path, vin_column)
    except FleetFileError:
        for _ in slices:  # a file that does not parse says so first, as when it was read whole
            pass
        raise
    renames: dict[str, str] = {}
    km_header = False
    read = blanks = 0
    template = None
    for frame in slices:
        if vin_name == NO_VIN_COLUMN:
            frame = frame.with_columns(pl.lit(None, pl.String).alias(NO_VIN_COLUMN))
        not_text = _holds_no_text(frame.schema[vin_name])
        frame = _as_text(frame, path, vin_name)
        if not renames:
            renames = _roster_names(frame.columns, vin_name)
            mileage_header = next((name for name, canonical in renames.items() if canonical == "mileage"), None)
            km_header = mileage_header is not None and _header_key(mileage_header) in KM_HEADERS
        frame = frame.rename(renames).with_columns(
            pl.lit(str(path)).alias("source_file"),
            pl.int_range(read + 1, read + pl.len() + 1, dtype=pl.Int64).alias("source_row"),
        )
        read += frame.height
        blank = _blank_rows(frame)
        count = int(blank.sum())
        blanks += count
        frame = frame.filter(~blank) if count else frame
        if km_header:
            frame = frame.with_columns(pl.lit("km").alias("_mileage_header_unit"))  # read by _tidy, then dropped
        if template is None:
            template = frame.clear()
            pieces.templates.append(template)
        _process_slice(frame, pieces, not_text=not_text)
    if blanks == read:  # no rows, or blank lines only
        raise FleetFileError(path, NO_ROWS)
    pieces.blank_rows += blanks


def _process_slice(rows: pl.DataFrame, pieces: _Pieces, *, not_text: bool = False) -> None:
    """Check one slice's VINs; each row goes to the accepted rows (collapsed once all are read), the
    rejected rows or the rows waiting for a plate lookup. `not_text`: the file's VIN column holds numbers
    (or dates, booleans), each cell refused as such whatever its digits spell."""
    # A VIN cell longer than RAW_VALUE_LIMIT is no VIN, however many spaces it holds: it is rejected as
    # wrong_length and kept cut short, so a 100 MB cell is neither copied ten times by the checks below
    # nor stored whole in rejected_rows.
    raw_length = pl.col("raw_vin").str.len_chars()
    rows = rows.with_columns(
        (raw_length > RAW_VALUE_LIMIT).fill_null(False).alias("_too_long"),
        pl.when(raw_length > RAW_VALUE_LIMIT)
        .then(pl.concat_str(pl.col("raw_vin").str.slice(0, RAW_VALUE_LIMIT), pl.lit("… ("),
                            raw_length.cast(pl.String), pl.lit(" characters)")))
        .otherwise(pl.col("raw_vin"))
        .alias("raw_vin"),
    )
    rows = rows.with_columns(normalise_vin_expr("raw_vin").alias("vin"))
    rows = with_check_digit_valid(rows, "vin", "check_digit_valid")
    by_rule = vin_reject_reason_expr("vin", "check_digit_valid")
    if not_text:
        by_rule = pl.when(pl.col("raw_vin").is_not_null()).then(pl.lit(NOT_TEXT)).otherwise(by_rule)
    rows = rows.with_columns(
        pl.when(pl.col("_too_long")).then(pl.lit(WRONG_LENGTH)).otherwise(by_rule).alias("reason")
    ).drop("_too_long")
    pieces.rows_in += rows.height
    if "plate" in rows.columns:
        # An empty VIN cell with a plate beside it: the VIN is looked up by plate later, not rejected.
        waits = ((pl.col("reason") == MISSING) & (pl.col("plate").str.strip_chars().str.len_chars() > 0)).fill_null(False)
        plates = rows.filter(waits).drop("reason", "raw_vin", "vin", "check_digit_valid")
        if plates.height:
            pieces.plates.append(plates)
            rows = rows.filter(~waits)
    rejected = rows.filter(pl.col("reason").is_not_null())
    if rejected.height:
        pieces.rejected.append(rejected.select("source_file", "source_row", pl.col("raw_vin").alias("raw_value"), "reason")
                               .cast(REJECTED_SCHEMA))  # type: ignore[arg-type]
        rows = rows.filter(pl.col("reason").is_null())
    pieces.accepted.append(rows.drop("reason", "raw_vin"))


def _blank_rows(frame: pl.DataFrame) -> pl.Series:
    """True for a row whose every cell is empty or spaces (a blank line). Only rows with a blank VIN cell
    can be: the other columns are looked at for those alone, not for a million rows with a VIN."""
    data = [c for c in frame.columns if c not in ("source_file", "source_row")]

    def empty(column: str) -> pl.Expr:
        return pl.col(column).is_null() | pl.col(column).str.contains(r"^\s*$")

    candidate = frame.select(empty("raw_vin")).to_series()
    if not candidate.any():
        return candidate
    rows = frame.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_index"), *data).filter(candidate)
    blank_index = rows.filter(pl.all_horizontal(empty(c) for c in data))["_index"]
    return pl.select(pl.int_range(frame.height, dtype=pl.UInt32).is_in(blank_index.implode())).to_series()


def _parse_mileage(expr: pl.Expr) -> pl.Expr:
    # "12,345", "12 345 mi", "12345.0", "12 345 KM" all mean 12345; anything else becomes null (the VIN still lands).
    digits = expr.str.to_lowercase().str.replace_all(r"[,\s_]|mi(les)?$|kms?$|kilomet\w*$", "").str.strip_chars()
    return digits.cast(pl.Float64, strict=False).round(0).cast(pl.Int64, strict=False)


def _plain_number(expr: pl.Expr) -> pl.Expr:
    # Most cells are plain digits: parsed by one cast; only the others go through the regexes.
    return expr.cast(pl.Int64, strict=False)


def _mileage_number(expr: pl.Expr) -> pl.Expr:
    """`_parse_mileage`, with the regexes run only on cells that are not plain digits (null cells cost nothing)."""
    plain = _plain_number(expr)
    return pl.coalesce(plain, _parse_mileage(pl.when(plain.is_null()).then(expr)))


def _mileage_unit(header_unit: pl.Expr) -> pl.Expr:
    """`km` or `mi`: what the cell says ("12 345 km"), else what its header says; null when neither says (a plain
    number): the valuation decides by the vehicle's market (tasks/datasets.py `valuation_request`), never here."""
    # A plain number says no unit: its cell is left null here, so the unit regexes skip it.
    cell = pl.when(_plain_number(pl.col("mileage")).is_null()).then(pl.col("mileage")).str.strip_chars().str.to_lowercase()
    return (pl.when(_mileage_number(pl.col("mileage")).is_null()).then(None)
            .when(cell.str.contains(r"(km|kms|kilomet\w*)$")).then(pl.lit("km"))
            .when(cell.str.contains(r"mi(les)?$")).then(pl.lit("mi"))
            .otherwise(header_unit)
            .alias("mileage_unit"))


def _condition(roster: pl.DataFrame) -> pl.DataFrame:
    """A condition the spec knows (any case, any spaces), else NULL; a cell it does not know is kept as written
    in `condition_rejected` and the vehicle stays on the roster (the condition only shapes its valuation)."""
    written = pl.col("condition").str.strip_chars()
    given = written.str.to_lowercase().str.replace_all(r"\s", "")
    known = given.is_in(CONDITIONS)
    return roster.with_columns(
        pl.when(known).then(given).alias("condition"),
        pl.when(~known & (given != "")).then(written.str.slice(0, RAW_VALUE_LIMIT)).alias("condition_rejected"),
    )


def read_fleet(paths: Sequence[str | Path] | str | Path, vin_column: str | None = None) -> IngestResult:
    """Read, normalise, validate and de-duplicate fleet files.

    paths: files, folders (every CSV/Parquet inside, sorted) or glob patterns.
    vin_column: header of the VIN column when it cannot be found by name.

    Returns an IngestResult: `roster` (one row per valid VIN, first occurrence's
    columns, `duplicate_count` = further occurrences collapsed into it) and
    `rejected` (source_file, source_row, raw_value, reason). `source_row` is the
    1-based data row number (first row after the header is 1).
    Raises FleetFileError for a file that cannot be used at all.
    """
    files, skipped = expand_paths(paths)
    if not files:
        raise FleetFileError(", ".join(map(str, paths if isinstance(paths, list) else [paths])), "no files to read")
    with memory.guarded(memory.READ):  # an allocation refused while reading: one line, exit code 8
        return _read_files(files, skipped, vin_column)


def _read_files(files: list[Path], skipped: list[str], vin_column: str | None) -> IngestResult:
    """`read_fleet`'s reading: every file slice by slice, then the roster collapsed from the VINs kept."""
    pieces = _Pieces()
    for path in files:
        _read_file(path, vin_column, pieces)
    # Every file's columns, in the order they appear (as one frame of all the files' rows would have them).
    columns = pl.concat(pieces.templates, how="diagonal_relaxed").drop("raw_vin")
    rejected = pl.concat([pl.DataFrame(schema=REJECTED_SCHEMA), *pieces.rejected])
    plates = None
    if "plate" in columns.columns:
        plates = _tidy(pl.concat([columns, *pieces.plates], how="diagonal_relaxed"))
    # Which rows make the roster (the first of each VIN), worked out on the VINs alone: a group-by over
    # millions of VINs would hold a list of rows per VIN at once.
    vins = pl.concat([piece.get_column("vin") for piece in pieces.accepted])
    first = np.zeros(vins.len(), dtype=bool)
    first[vins.arg_unique().to_numpy()] = True
    # Each first row's further occurrences, counted on the (few) duplicates.
    further = vins.filter(~pl.Series(first)).value_counts(name="duplicate_count")
    duplicate_count = (vins.filter(pl.Series(first)).to_frame()
                       .join(further, on="vin", how="left", maintain_order="left")
                       .get_column("duplicate_count").fill_null(0).cast(pl.Int64))
    del vins, further
    # Then slice by slice, each slice let go once its first rows are kept: the rows are never held twice.
    kept, start = [], 0
    aligned = len(pieces.templates) > 1  # every file's columns in every slice, as one frame of all rows has them
    while pieces.accepted:
        piece = pieces.accepted.pop(0)
        start += piece.height
        piece = piece.filter(pl.Series(first[start - piece.height : start]))
        kept.append(_tidy(pl.concat([columns, piece], how="diagonal_relaxed") if aligned else piece))
    roster = pl.concat(kept).with_columns(duplicate_count)
    del kept
    duplicates = int(duplicate_count.sum())

    return IngestResult(
        roster=roster,
        rejected=rejected,
        files=[str(p) for p in files],
        rows_in=pieces.rows_in,
        valid=roster.height,
        duplicates=duplicates,
        blank_rows=pieces.blank_rows,
        skipped_files=skipped,
        plates=plates if plates is not None else pl.DataFrame(),
    )


def _tidy(frame: pl.DataFrame) -> pl.DataFrame:
    """Roster columns in their types and order: mileage a number with its unit, condition checked, state upper
    case, VIN and source first."""
    if "mileage" in frame.columns:
        header_unit = pl.col("_mileage_header_unit") if "_mileage_header_unit" in frame.columns else pl.lit(None, pl.String)
        frame = frame.with_columns(_mileage_unit(header_unit), _mileage_number(pl.col("mileage")).alias("mileage"))
    frame = frame.drop("_mileage_header_unit", strict=False)
    if "condition" in frame.columns:
        frame = _condition(frame)
    if "state" in frame.columns:
        frame = frame.with_columns(pl.col("state").str.strip_chars().str.to_uppercase())
    leading = [c for c in ROSTER_LEADING if c in frame.columns]
    trailing: list[str] = [c for c in ("check_digit_valid", "duplicate_count") if c in frame.columns]
    others = [c for c in frame.columns if c not in leading and c not in trailing]
    return frame.select(leading + others + trailing)
