"""Prefect's API server app as fleet's local servers run it (flows/processes.py `prefect_server_process`):
Prefect's own `create_app`, loaded with the cyclic garbage collector off.

Loading the server's code makes objects that live as long as it does; collected as they are made, they took
0.45 s of its 2.6 s start here (a first command waits for that start), and every full collection after would
walk them again: `gc.freeze` sets them aside once the app is made (with the few cycles already unreachable: a full
collection to find them would cost a tenth of a second more).
"""

from __future__ import annotations

import gc
from typing import Any

from fleet_data.tasks.control.collector import set_aside


def create_app() -> Any:
    """Prefect's server app (`prefect.server.api.server.create_app`), for uvicorn's `--factory`."""
    gc.disable()
    try:
        from prefect.server.api.server import create_app as prefect_app

        app = prefect_app()
    finally:
        set_aside()
        gc.enable()
    return app
