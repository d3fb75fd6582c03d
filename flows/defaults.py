"""Where things go unless the user says otherwise (kept apart so commands need not import Prefect).

Declared with the options they are the defaults of, in tasks/settings.py.
"""

from fleet_data.tasks.settings import DEFAULT_DB, DEFAULT_LAKE, DEFAULT_VALUE_MOVE

__all__ = ["DEFAULT_DB", "DEFAULT_LAKE", "DEFAULT_VALUE_MOVE"]
