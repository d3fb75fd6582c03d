"""`fleet refresh` options refused before anything runs: no database, no sandbox, no Prefect."""

from __future__ import annotations

import pytest

from fleet_data.flows.cli import main


@pytest.mark.parametrize("size", ["10001", "0", "250000"])
def test_a_batch_size_the_service_refuses_is_refused_first(size, fleet_file, tmp_path, capsys):
    db = tmp_path / "fleet.duckdb"
    assert main(["refresh", fleet_file(5), "--db", str(db), "--lake", "", "--batch-size", size]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--batch-size {size}" in err and "10,000" in err
    assert not db.exists()  # refused before the run: no ledger entry can be left behind


def test_recall_details_match_is_a_choice(fleet_file, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["refresh", fleet_file(5), "--db", str(tmp_path / "f.duckdb"), "--recall-details", "make"])
    assert exit_.value.code == 2
    assert "invalid choice: 'make'" in capsys.readouterr().err
