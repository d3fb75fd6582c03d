"""`fleet` once installed: put the project's folders first on the module path, then run the command.

A wheel installs `flows`, `tasks`, `connectors` and `sql` inside one folder, `site-packages/fleet_data/`,
not as top-level modules: installing fleet-data never adds, replaces or shadows another project's
`tasks` or `flows`. The code imports them by those names, as in the checkout (where Prefect loads
`flows/refresh.py` by path), so a process that runs fleet-data puts that folder first on its path: the
`fleet` command, and a Prefect deployment whose entrypoint is `fleet_data.launcher:refresh_fleet`. The
processes they start inherit it (PYTHONPATH). Why this and not `fleet_data.tasks` imports: README,
"Installing".
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

HOME = Path(__file__).resolve().parent  # site-packages/fleet_data once installed; the checkout's root in it


def use_home() -> None:
    """Put HOME first on this process's module path and its children's (PYTHONPATH)."""
    home = str(HOME)
    if home in sys.path:
        sys.path.remove(home)
    sys.path.insert(0, home)
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != home]
    os.environ["PYTHONPATH"] = os.pathsep.join([home, *inherited])


def main() -> int:
    use_home()
    from flows.cli import main as fleet

    return fleet()


def __getattr__(name: str) -> Any:
    """The flows as Prefect entrypoints of an installed fleet-data: `fleet_data.launcher:refresh_fleet`."""
    if name == "refresh_fleet":
        use_home()
        from flows.refresh import refresh_fleet

        return refresh_fleet
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    sys.exit(main())
