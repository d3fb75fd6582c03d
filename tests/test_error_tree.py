"""One error tree: every exception class of flows/ and tasks/ is a FleetError (tasks/errors.py), cancellation aside.

Every module of flows/ and tasks/ is imported and every exception class they define is found through
`__subclasses__`, so a class added anywhere later is walked too. Only the root may derive from a
built-in exception alone; a kind may also be a ValueError (callers that catch ValueError keep working),
but only beside its place in the tree. RunCancelled is a BaseException on purpose: no `except Exception`
may swallow a stop.
"""

from __future__ import annotations

import builtins
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILT_IN = {c for c in vars(builtins).values() if isinstance(c, type) and issubclass(c, BaseException)}
CANCELLATION = {"fleet_data.tasks.control.signals.RunCancelled"}


def _modules() -> list[str]:
    names = []
    for package in ("flows", "tasks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__main__":  # runs the command line when imported
                continue
            if parts[-1] == "__init__":
                parts.pop()
            names.append(".".join(["fleet_data", *parts]))
    return names


def project_exceptions() -> dict[str, type[BaseException]]:
    for name in _modules():
        importlib.import_module(name)
    found: dict[str, type[BaseException]] = {}
    todo: list[type[BaseException]] = [BaseException]
    seen: set[type] = set()
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith(("fleet_data.flows", "fleet_data.tasks")):
            found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return found


def _project(cls: type) -> bool:
    return cls.__module__.startswith("fleet_data.")


def test_at_most_one_class_derives_straight_from_a_built_in_exception():
    classes = project_exceptions()
    assert len(classes) > 10  # the walk found the tree
    # straight from a built-in: no project class among its bases (MissingKey(UsageError, ValueError) is in the tree)
    straight = sorted(name for name, cls in classes.items()
                      if name not in CANCELLATION and not any(_project(base) for base in cls.__bases__))
    assert straight == ["fleet_data.tasks.errors.FleetError"]
    root = classes["fleet_data.tasks.errors.FleetError"]
    outside = sorted(name for name, cls in classes.items() if name not in CANCELLATION and not issubclass(cls, root))
    assert outside == []
    assert {b for b in root.__bases__} <= BUILT_IN
