"""Our errors: one tree, each kind with the exit code `fleet` ends with (the table: tasks/exitcodes.py).

Only the root derives from a built-in exception; a kind that callers also catch as a ValueError says so
beside its place in the tree. `fleet` turns any of them into one line (or a JSON error) and its code in
one place, flows/cli/errors.py. The connector keeps its own tree (connectors/errors.py): it knows
nothing of `fleet`.

    FleetError                    1  bug: the code's fault, not the input's
    ├── UsageError                2  usage: the user fixes the arguments, a file, a path or a setting
    │   ├── CommandError             flows/checks.py: a check before anything started (its code: 2, or 75)
    │   ├── SettingsError            tasks/settings.py: a setting that cannot be used
    │   │   └── ConfigError          flows/config.py: fleet.toml
    │   ├── EnvironmentFault         tasks/control/faults.py: a file or folder that went wrong under a run
    │   │   └── DatabaseUnusable     tasks/store/database.py: damaged, not a database, a folder in the way
    │   ├── FleetFileError           tasks/ingest/fleet_files.py: a fleet file that cannot be used
    │   ├── RunRefused (ValueError)  tasks/plan/provenance.py: this database refuses the run
    │   ├── MissingKey (ValueError)  flows/apikey.py: no key anywhere a flow run looks
    │   └── ClusterError (ValueError) flows/fetchers.py: the Dask cluster cannot fetch for this run
    ├── DatabaseError             1  tasks/store/database.py: the store refused (DuckDB's errors, translated)
    │   ├── DatabaseBusy             another process holds the working store
    │   └── DatabaseUnusable      2  (above)
    ├── RunLocked                75  busy: tasks/run/lock.py, another live run holds the database
    ├── ResourceLost         6, 7, 9  no_space / store_lost / service_lost: tasks/control/resources.py, by its `kind`
    ├── OutOfMemory               8  no_memory: tasks/control/memory.py
    └── Stopped                   1  tasks/control/stops.py: a call not started; caught inside the run

    RunCancelled (BaseException)  5  cancelled: tasks/control/signals.py, outside the tree on purpose, so
                                     that no `except Exception` swallows a stop
"""

from __future__ import annotations

from fleet_data.tasks.exitcodes import BUG, USAGE


class FleetError(Exception):
    """Something fleet-data itself says went wrong; `code` is the exit code `fleet` ends with."""

    code: int = BUG


class UsageError(FleetError):
    """The user can fix it (arguments, a file, a path, a setting): one line, exit code 2."""

    code = USAGE
