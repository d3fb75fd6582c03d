"""Failpoints: named places where a crash test can freeze the process, to kill it exactly there.

Why this exists: a refresh must survive `kill -9` anywhere, but killing it "after a while" rarely
lands in the narrow windows that matter most: between the service accepting a recall batch and
the ledger learning its id, or inside a landing transaction after some writes and before COMMIT.
A failpoint makes such a window reachable on purpose (the technique of TiKV's fail-rs and
FoundationDB's simulation): the code says `failpoint("landing")` at the spot, and a test runs the
refresh with

    FLEET_FAILPOINT=landing:3             # the 3rd time the process passes `failpoint("landing")`
    FLEET_FAILPOINT_MARKER=/tmp/x/marker  # written when it gets there

The process then writes the marker and sleeps (holding whatever it holds: locks, an open
transaction), so the test, seeing the marker, sends SIGKILL with the process frozen at that line.

Unset (always, outside crash tests) a failpoint costs one string comparison: the environment is
read once, at import.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from fleet_data.tasks.settings import ProcessSettings, SettingsError, process_settings


def _read() -> ProcessSettings:
    try:
        return process_settings()
    except SettingsError:  # another FLEET_* setting is wrong: the command refuses it; no failpoint here
        return ProcessSettings.model_construct()

HOLD_SECONDS = 120.0  # long enough for any test to kill; bounded, so a forgotten process still ends

_settings = _read()
_name, _, _nth = _settings.failpoint.partition(":")
_target = int(_nth or 1)
_marker = _settings.failpoint_marker
_passes = 0
_lock = threading.Lock()


def failpoint(name: str) -> None:
    """Freeze here if FLEET_FAILPOINT names this point and this is the chosen pass; else nothing."""
    if name != _name:
        return
    global _passes
    with _lock:
        _passes += 1
        if _passes != _target:
            return
    if _marker:
        Path(_marker).write_text(f"{name}:{_target} pid={os.getpid()}\n", encoding="utf-8")
    time.sleep(HOLD_SECONDS)
