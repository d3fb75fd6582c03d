"""Where things go unless the user says otherwise (kept apart so commands need not import Prefect)."""

DEFAULT_DB = "data/fleet.duckdb"
DEFAULT_LAKE = "data/lake"
