"""Which paths can be a fleet file: regular files only, told without opening them.

A named pipe (FIFO) blocks the reader until something writes to it, a character device such as
/dev/zero never ends, a socket cannot be opened at all: none can be read twice (the command reads a
fleet file to check it, the flow reads it again), so each is refused by name before anything opens it.
Standard library only: the command's first checks use it (flows/checks.py).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
ADVICE = "it is read more than once, so save the data to a regular file and pass that"


def special_kind(path: Path | str) -> str | None:
    """What `path` is when it is neither a regular file nor a folder (following links), else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # missing or unreadable: the caller's own checks say so
    return next((kind for test, kind in KINDS if test(mode)), None)


def not_regular(path: Path | str) -> str | None:
    """The one-line problem with `path` as a fleet file if it is a FIFO, a device or a socket, else None."""
    kind = special_kind(path)
    return f"{kind}, not a regular file; {ADVICE}" if kind else None
