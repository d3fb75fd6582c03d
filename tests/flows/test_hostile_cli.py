"""`fleet refresh` on hostile files: exit 2 and one line on stderr naming the file, never a traceback.

Unusable files are refused before the sandbox, Prefect or the database are touched, so these tests need
no Prefect server; only the last test runs a (dry-run) flow, on files whose rows are rejected one by one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from fleet_data.flows.cli import main

ROOT = Path(__file__).resolve().parents[2]
FLEETS = ROOT / "tests" / "fixtures" / "fleets"
HOSTILE = FLEETS / "hostile"

# One of each kind of unusable file, with a phrase of its message.
UNUSABLE = {
    FLEETS / "empty.csv": "file is empty",
    FLEETS / "header_only.csv": "has a header but no data rows",
    FLEETS / "no_vin_column.csv": "no VIN column found",
    HOSTILE / "zip_named.csv": "an Excel workbook or other ZIP archive",
    HOSTILE / "random_bytes_no_nul.csv": "binary content",
    HOSTILE / "junk.parquet": "unreadable Parquet file",
    HOSTILE / "csv_named.parquet": "not a Parquet file",
    HOSTILE / "vin_list.parquet": "holds lists",
    HOSTILE / "unterminated_quote.csv": "never closed",
    HOSTILE / "ragged_row.csv": "row 2 has 4 fields",
}


def one_error_line(err: str, path: Path | str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {path}: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(autouse=True)
def no_service(monkeypatch):
    # Without these the CLI would start the embedded sandbox; a refused file must not get that far.
    monkeypatch.delenv("VDS_API_KEY", raising=False)
    monkeypatch.delenv("VDS_BASE_URL", raising=False)


@pytest.mark.parametrize("path", list(UNUSABLE), ids=lambda p: p.name)
def test_unusable_file_is_refused_before_anything_starts(path, tmp_path, capsys):
    db = tmp_path / "fleet.duckdb"
    assert main(["refresh", str(path), "--db", str(db)]) == 2
    out, err = capsys.readouterr()
    assert UNUSABLE[path] in one_error_line(err, path)
    assert out == ""  # not even the "using the embedded sandbox" line: nothing was started
    assert not db.exists()


def test_a_good_file_beside_a_bad_one_writes_nothing(tmp_path, capsys):
    db = tmp_path / "fleet.duckdb"
    bad = HOSTILE / "png_named.csv"
    assert main(["refresh", str(FLEETS / "crlf.csv"), str(bad), "--db", str(db)]) == 2
    assert "a PNG image" in one_error_line(capsys.readouterr().err, bad)
    assert not db.exists()


@pytest.fixture(scope="module")
def hundred_mb_line(tmp_path_factory):
    path = tmp_path_factory.mktemp("huge") / "one_line.csv"
    chunk = b"1HGCM82633A004352," * 58_255  # about 1 MB of VINs, all on one line
    with path.open("wb") as handle:
        handle.write(b"vin,")
        while handle.tell() < 100 * 1024 * 1024:
            handle.write(chunk)
    yield path
    path.unlink()  # pytest keeps the last runs' temporary folders: not 100 MB of them each


def test_a_100_mb_single_line_is_refused_with_one_line(hundred_mb_line, tmp_path, capsys):
    assert main(["refresh", str(hundred_mb_line), "--db", str(tmp_path / "fleet.duckdb")]) == 2
    line = one_error_line(capsys.readouterr().err, hundred_mb_line)
    assert "no line break in the first 64 KB" in line and len(line) < 400


def test_unexpected_failure_is_one_line_and_minus_v_shows_the_traceback(tmp_path, capsys, monkeypatch):
    """A bug (here a polars error ingest does not expect) is reported as one, not dressed up as bad input."""
    import fleet_data.tasks.ingest.fleet_files

    def broken(*args, **kwargs):
        raise pl.exceptions.ComputeError("invalid utf8\n\nThis error occurred in the following expression:")

    monkeypatch.setattr(fleet_data.tasks.ingest.fleet_files, "read_fleet", broken)
    argv = ["refresh", str(FLEETS / "crlf.csv"), "--db", str(tmp_path / "fleet.duckdb")]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "unexpected ComputeError: invalid utf8 This error occurred" in err
    assert "run again with -v to see the traceback" in err
    with pytest.raises(pl.exceptions.ComputeError):
        main(["-v", *argv])


def test_a_polars_panic_is_caught_at_the_boundary_too(tmp_path, capsys, monkeypatch):
    # PanicException derives from BaseException, so `except Exception` alone would let it through.
    import fleet_data.tasks.ingest.fleet_files

    def panics(*args, **kwargs):
        raise pl.exceptions.PanicException("index out of bounds")

    monkeypatch.setattr(fleet_data.tasks.ingest.fleet_files, "read_fleet", panics)
    assert main(["refresh", str(FLEETS / "crlf.csv"), "--db", str(tmp_path / "fleet.duckdb")]) == 1
    assert "unexpected PanicException: index out of bounds" in capsys.readouterr().err


def test_the_real_command_prints_no_traceback(tmp_path):
    """As a user runs it: a separate process, everything it prints, not only what capsys sees."""
    bad = HOSTILE / "random_bytes.csv"
    done = subprocess.run(
        [sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(bad), "--db", str(tmp_path / "fleet.duckdb")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k not in ("VDS_API_KEY", "VDS_BASE_URL")} | {"PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 2
    assert "binary content" in one_error_line(done.stderr, bad)
    assert done.stdout == "" and "Traceback" not in done.stdout


@pytest.mark.usefixtures("prefect_server")
def test_rows_rejected_one_by_one_run_through_and_are_all_counted(service, db_path, read, capsys):
    formulas, spellings = HOSTILE / "formula_injection.csv", HOSTILE / "vin_spellings.csv"
    code = main(["refresh", str(formulas), str(spellings), "--db", db_path, "--json", "--lake", "",
                 "--datasets", "specs"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in out + err
    ingest = json.loads(out)["ingest"]
    # 7 + 16 rows: 4 VINs, 6 duplicates (3 within vin_spellings.csv, 3 across the files), 4 + 9 rejected.
    assert ingest == {"rows_in": 23, "valid": 4, "duplicates": 6, "rejected": 13, "blank_rows": 0, "files": 2}
    assert read(db_path, "SELECT count(*) FROM vehicles") == [(4,)]
    rejected = read(db_path, "SELECT raw_value FROM rejected_rows WHERE source_file LIKE '%formula%' ORDER BY source_row")
    assert [r[0] for r in rejected] == ['=HYPERLINK("http://x","y")', "+cmd", "-2+3", "@SUM(1)"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "refresh"])
def test_a_fifo_as_the_fleet_file_is_refused_at_once_with_one_line(tmp_path, dry_run):
    """`mkfifo f.csv; fleet refresh f.csv --dry-run` waited for a writer for ever (killed at 60 s)."""
    fifo = tmp_path / "f.csv"
    os.mkfifo(fifo)
    command = [sys.executable, "-m", "fleet_data.flows.cli", "refresh", str(fifo), "--db", str(tmp_path / "fleet.duckdb")]
    env = {k: v for k, v in os.environ.items() if k not in ("VDS_API_KEY", "VDS_BASE_URL")} | {"PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(command + (["--dry-run"] if dry_run else []), cwd=ROOT, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = child.communicate(timeout=90)  # a hang guard for a loaded box, not a timing
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail("the command waited on the FIFO")
    assert child.returncode == 2
    assert "a named pipe (FIFO), not a regular file" in one_error_line(err, fifo)
    assert out == "" and not (tmp_path / "fleet.duckdb").exists()


def test_a_fifo_as_the_vins_file_or_the_served_file_is_refused(tmp_path, capsys):
    fifo = tmp_path / "vins.txt"
    os.mkfifo(fifo)
    assert main(["backfill", "--vins-file", str(fifo), "--db", str(tmp_path / "fleet.duckdb")]) == 2
    assert "--vins-file" in capsys.readouterr().err
    assert main(["serve", str(fifo), "--db", str(tmp_path / "fleet.duckdb")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a named pipe (FIFO), not a regular file" in err
