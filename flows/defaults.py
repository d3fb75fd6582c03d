"""Where things go unless the user says otherwise (kept apart so commands need not import Prefect)."""

DEFAULT_DB = "data/fleet.duckdb"
DEFAULT_LAKE = "data/lake"
# A valuation that moved more than this, in percent, from the vehicle's previous one is a change (`changes`).
DEFAULT_VALUE_MOVE = 10.0
