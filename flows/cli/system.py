"""The systems `fleet` runs on: Linux and macOS (docs/installing.md, "Supported systems").

A run holds its database with POSIX file locks (`fcntl`: tasks/run/lock.py), which Windows lacks. There,
every command is refused in one line with exit code 2, before anything is imported that needs them,
rather than failing on the import as "a bug". Under WSL 2, `fleet` runs as on Linux.
"""

from __future__ import annotations

import importlib.util
import sys

SUPPORTED = "Linux and macOS"


def unsupported_system() -> str | None:
    """Why this system cannot run `fleet` (one line), or None where it can."""
    if importlib.util.find_spec("fcntl") is not None:
        return None
    return (f"fleet runs on {SUPPORTED}; this system ({sys.platform}) has no POSIX file locks (fcntl), which a run "
            "needs to hold its database; on Windows, run it under WSL 2")
