"""What every `fleet` command's exit code means: one table, read by cron, Prefect and the README.

Codes 3-9 are the run's outcome when it ended without a usage error; 75 is the lock's (flows/locking.py).
"""

from __future__ import annotations

COMPLETED = 0  # every planned VIN-dataset answered (found, no data, or not applicable); a dry run planned
BUG = 1  # an unexpected error: a bug, not the input's fault (run again with -v)
USAGE = 2  # bad arguments, files, paths or settings: refused before anything started, nothing written; also a
# file or folder that went wrong under a run (damaged, moved away, unwritable: tasks/control/faults.py)
PARTIAL = 3  # the run ended with pending or failed VIN-datasets (quota, a paused endpoint, faults): run again
REFUSED = 4  # the key was refused (401/403) or the plan cost more than --max-units: nothing useful was called
CANCELLED = 5  # SIGTERM/SIGINT: no new call started, what was fetched lands (now or next run), the rest stays pending
NO_SPACE = 6  # a disk the run writes (store, staging, lake) was full or nearly: it stopped calling, landed what it
# had and ended `failed`, not published; free space and run again: nothing paid is bought twice
STORE_LOST = 7  # the working store or the lock file was deleted or replaced during the run: stopped, not published
NO_MEMORY = 8  # not enough memory: the address-space limit is below what the command needs to start, or an
# allocation was refused while reading, planning or landing the roster: one line, nothing paid is bought twice
SERVICE_LOST = 9  # a service the run depends on stopped answering during it (the object store of --staging, the
# Prefect API, the Dask scheduler or every worker): it stopped calling, landed what it had, ended `failed`
BUSY = 75  # EX_TEMPFAIL: another run holds the database (see --wait), by our lock or by DuckDB's

BY_STATUS = {"completed": COMPLETED, "planned": COMPLETED, "partial": PARTIAL, "refused": REFUSED,
             "cancelled": CANCELLED}
KINDS = {USAGE: "usage", BUG: "bug", BUSY: "busy", REFUSED: "refused", PARTIAL: "partial", CANCELLED: "cancelled",
         NO_SPACE: "no_space", STORE_LOST: "store_lost", NO_MEMORY: "no_memory",
         SERVICE_LOST: "service_lost"}  # an error's kind, as JSON names it
BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of the output went away (`fleet status | head -1`); ended quietly

# Each code in the user's words, for `fleet --help` and the reference page (docs/reference/exit-codes.md):
# (code, its kind as a JSON error names it (KINDS), what it means).
MEANINGS: tuple[tuple[int, str, str], ...] = (
    (COMPLETED, "completed", "every planned VIN-dataset answered (found, no data, not applicable); or a dry run "
                             "planned"),
    (BUG, "bug", "not your input's fault: one line (`-v` shows the traceback). `fleet lookup`: the call was refused "
                 "or failed (`error: <status> <message>`)"),
    (USAGE, "usage", "bad arguments, files, paths or settings, or an option whose extra is not installed: refused "
                     "before anything started, nothing written; also a damaged database, a folder in the way or not "
                     "writable, an unreadable `fleet.toml`, an unsupported system (Windows)"),
    (PARTIAL, "partial", "the run ended with pending or failed VIN-datasets (a quota or credits ran out, faults): "
                         "run again"),
    (REFUSED, "refused", "the plan cost more than `--max-units` (nothing called), or the key was refused (401/403)"),
    (CANCELLED, "cancelled", "SIGTERM or SIGINT: no new call started, what was fetched lands (now or first thing "
                             "next run), the rest stays pending"),
    (NO_SPACE, "no_space", "a disk the run writes was full: it stopped calling, landed what it had, published "
                           "nothing and ended failed; free space and run again, nothing paid is bought twice"),
    (STORE_LOST, "store_lost", "the working store or the lock file was deleted or replaced during the run: "
                               "stopped, not published"),
    (NO_MEMORY, "no_memory", "the address-space limit (`ulimit -v`) is below what `fleet` needs to start, or an "
                             "allocation was refused while reading the fleet, planning or landing the roster: one "
                             "line, nothing paid is bought twice"),
    (SERVICE_LOST, "service_lost", "a service the run depends on stopped answering during it: the object store of "
                                   "`--staging`, the Prefect API, the Dask scheduler or every worker. It stopped "
                                   "calling, landed and published what it had and ended failed; what could not land "
                                   "lands at the next run, nothing paid is bought twice"),
    (BUSY, "busy", "EX_TEMPFAIL: another refresh or backfill holds the database (our lock or DuckDB's); nothing "
                   "was started (`--wait` queues instead)"),
    (BROKEN_PIPE, "broken_pipe", "the reader of the output went away (`fleet status | head -1`): ended quietly"),
)
