"""Types an analyst expects (issue 21): money DECIMAL to the cent, dates and months DATE, in tables and views.

Money is what the dictionary says is in dollars; a date is a column named *_date, *_on, month or *_month.
A database from before migration 0009 is upgraded with its values kept.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

from fleet_data.tasks.store import dictionary
from fleet_data.tasks.store.database import SQL_DIR, Database

T0 = datetime(2026, 2, 5, 12, 0, tzinfo=timezone.utc)
ROOT = Path(__file__).resolve().parents[2]
UPGRADE_AND_DIE = """
import os, sys
from fleet_data.tasks.store.database import Database
db = Database(sys.argv[1])
assert 9 in db.applied
os._exit(0)
"""


def _named_as_date(column: str) -> bool:
    """valued_on, publish_date, month, valued_month; not a count such as valued_in_month."""
    return column.endswith(("_date", "_on")) or column == "month" or (column.endswith("_month") and "_in_" not in column)


def test_money_is_decimal_and_dates_are_dates_everywhere(db):
    wrong = []
    for relation in dictionary.catalog(db.connection, dictionary.load()):
        for column, data_type, text in relation.columns:
            if "dollars" in (text or "") and ("DOUBLE" in data_type or "FLOAT" in data_type or "DECIMAL" not in data_type):
                wrong.append(f"{relation.name}.{column} {data_type} (money)")
            if _named_as_date(column) and data_type != "DATE":
                wrong.append(f"{relation.name}.{column} {data_type} (a date)")
    assert wrong == []
    money = [(r.name, c) for r in dictionary.catalog(db.connection, dictionary.load()) for c, t, _ in r.columns
             if t.startswith("DECIMAL")]
    assert ("market_values", "retail") in money and ("fleet_value_by_model", "average_retail") in money


def test_a_database_from_before_0009_keeps_its_values(tmp_path):
    before = tmp_path / "migrations_0008"
    before.mkdir()
    for path in sorted((SQL_DIR / "migrations").glob("*.sql")):
        if int(path.name[:4]) < 9:
            shutil.copy(path, before)
    file = tmp_path / "old.duckdb"
    old = Database(file, migrations_dir=before, views_dir=tmp_path / "no_views")
    old.connection.execute(
        "INSERT INTO market_values (vin, valued_on, publish_date, retail, trade_in, valuation_groups, auction_values, "
        "run_id, fetched_at) VALUES "
        "('1HGCM82633A004352', DATE '2026-02-05', '2026-02-01', 25400.5, 19999.999, "
        " [{'kind': 'retail', 'tier': 'clean', 'base': 25000.0, 'mileage': -350.25, 'add_deduct': NULL, 'regional': NULL,"
        "   'adjusted': 24649.75}], {'low_auction_value': 18000.0, 'average_auction_value': 19000.0, "
        "   'high_auction_value': 20000.0, 'date_range': '2026-01-01 to 2026-01-31'}, 'r0', $t), "
        "('WBA3A5C56G0915102', DATE '2026-02-05', 'soon', NULL, NULL, [], NULL, 'r0', $t)", {"t": T0})
    old.close()
    # Upgraded by a process that dies before any checkpoint: the migration is only in the write-ahead log,
    # replayed by the next open (offline: the log must not need functions DuckDB loads later).
    subprocess.run([sys.executable, "-c", UPGRADE_AND_DIE, str(file)], cwd=ROOT, check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert Path(str(file) + ".wal").stat().st_size > 0
    new = Database(file)
    assert new.schema_version() >= 9
    rows = new.sql("SELECT vin, publish_date, retail, trade_in, valuation_groups[1].mileage AS mileage_adjustment, "
                   "auction_values.high_auction_value AS high FROM market_values ORDER BY vin").rows()
    assert rows == [
        ("1HGCM82633A004352", date(2026, 2, 1), Decimal("25400.50"), Decimal("20000.00"), Decimal("-350.25"),
         Decimal("20000.00")),
        ("WBA3A5C56G0915102", None, None, None, None, None),  # "soon" is no date: NULL (the text is in raw_responses)
    ]
    assert new.sql("SELECT published_on FROM latest_market_values WHERE vin = '1HGCM82633A004352'").item() == date(2026, 2, 1)
    new.close()
