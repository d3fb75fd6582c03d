"""Faults of the machine around a command, told apart from bugs.

A path that is missing, of the wrong kind or not writable, and a damaged database file, are the
environment's: the user can fix them, and the command says so in one line (what, where, what to do)
and exits 2 (flows/cli.py), never "this is a bug" with a traceback. This is the one place that says
which OSError or DuckDB error is such a fault and what to advise; callers that know more (which file
is the published database, which the working store) say it with `EnvironmentFault` themselves.
"""

from __future__ import annotations

import errno
import os
import re

from fleet_data.tasks.errors import UsageError

ADVICE = {
    errno.EACCES: "permission denied; fix its permissions or choose another path",
    errno.EPERM: "not permitted; fix its permissions or choose another path",
    errno.EROFS: "on a read-only file system; choose a path on a writable one",
    errno.ENOENT: "no such file or folder (moved or removed while the command ran?); put it back or check the path",
    errno.EISDIR: "is a folder where a file belongs; move the folder away or choose another path",
    errno.ENOTDIR: "part of the path is a file where a folder belongs; check the path",
    errno.ENOTEMPTY: "a folder is in the way; move it away or choose another path",
    errno.EEXIST: "something is in the way; move it away or choose another path",
    errno.ELOOP: "too many symbolic links; check the path",
    errno.ENAMETOOLONG: "the name is too long; choose a shorter path",
}  # a full disk (ENOSPC) is handled apart: its advice and what the run keeps differ

_IN_THE_WAY = (errno.EISDIR, errno.ENOTDIR, errno.ENOTEMPTY, errno.EEXIST)

# What DuckDB says, in an IO error, about a file that is not a whole DuckDB database (random bytes, cut short).
DAMAGED = ("not a valid DuckDB database file", "Could not read enough bytes", "Corrupt database file",
           "checksum", "Failed to read database header", "invalid block")
_QUOTED_FILE = re.compile(r'file "([^"]+)"')


class EnvironmentFault(UsageError):
    """The environment, not the code, stopped the command: one line for the user (exit 2)."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))  # one line, whatever the OS or DuckDB said


def damaged_database(exc: BaseException) -> bool:
    """Whether `exc` is DuckDB refusing a file that is not a (whole) DuckDB database."""
    return type(exc).__module__.startswith(("_duckdb", "duckdb")) and any(d in str(exc) for d in DAMAGED)


def _errno_in(text: str) -> int | None:
    """The OS error DuckDB's IO error passes on, by its text ("Permission denied", "Is a directory")."""
    if "IO Error" not in text:
        return None
    return next((number for number in ADVICE if os.strerror(number) in text), None)


def as_fault(exc: BaseException, path: object = None) -> EnvironmentFault | None:
    """`exc` as the user's fault to fix (None: not one, a bug or another kind of failure).

    `path` names the file when the error does not (DuckDB's messages quote it; an OSError may carry it).
    """
    if isinstance(exc, EnvironmentFault):
        return exc
    if isinstance(exc, OSError) and exc.errno in ADVICE:
        where = exc.filename if exc.filename is not None else path
        if exc.filename2 is not None and exc.errno in _IN_THE_WAY:  # a rename: what is in the way is its target
            where = exc.filename2
        return EnvironmentFault(f"{where or 'a file'}: {ADVICE[exc.errno]}")
    if not type(exc).__module__.startswith(("_duckdb", "duckdb")):
        return None
    quoted = _QUOTED_FILE.search(str(exc))
    where = path or (quoted.group(1) if quoted else "a database file")
    if damaged_database(exc):
        return EnvironmentFault(f"{where}: not a DuckDB database, or a damaged one ({exc}); restore it from a "
                                "backup or move it aside")
    number = _errno_in(str(exc))
    if number is not None:
        return EnvironmentFault(f"{where}: {ADVICE[number]}")
    return None
