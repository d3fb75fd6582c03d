"""Python's cyclic garbage collector while a command loads its code, and after.

A refresh loads some 600 modules, most of them Prefect's and pydantic's: some 180,000 objects the collector
tracks, which live as long as the process. Collected as they are made (a young collection every 700 allocations),
they cost the command 0.15-0.2 s of CPU; and every full collection during the run walks them all again: 7-8 of
them, 0.7-0.9 s of a 10,000 x 3 refresh's 13-14 s of CPU (docs/scale.md §5). So young collections come seldom while the code
loads (`loading`), and once it is loaded it is set aside for good (`loaded`, `gc.freeze`); the collector then
keeps Python's own pace.
"""

from __future__ import annotations

import atexit
import gc

LOADING_THRESHOLD = 50_000  # allocations between young collections while loading; cycles left meanwhile: a few MB
_USUAL = gc.get_threshold()
_set_aside = False  # whether `set_aside` has run in this process


def loading() -> None:
    """Collect young objects every `LOADING_THRESHOLD` allocations until `loaded` (a command that never loads its
    flows keeps this pace: fewer, longer young collections, the same work)."""
    gc.set_threshold(LOADING_THRESHOLD, *_USUAL[1:])


def loaded() -> None:
    """The command's code is loaded: what exists now is kept out of every later collection (the few cycles
    already unreachable with it: a full collection to find them would cost what this saves), and the collector
    goes back to its usual pace. At exit it is all collectable again (`set_aside`)."""
    set_aside()
    gc.set_threshold(*_USUAL)


def set_aside() -> None:
    """`gc.freeze`, once a process, undone as it exits: Python's last collections then free what was frozen as they
    would have, and libraries that count their objects at exit find none left (DuckDB's bindings printed some forty
    lines of "nanobind: leaked ..." otherwise). Once: a process that runs commands one after another (`main` called
    again, as the tests do) would freeze each time whatever the ones before left for the collector."""
    global _set_aside
    if _set_aside:
        return
    _set_aside = True
    gc.freeze()
    atexit.register(gc.unfreeze)
