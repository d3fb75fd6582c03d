"""The service key of a flow run: the environment (or `.env`) first, else the Prefect Secret block `vds-api-key`.

A work-pool worker or `fleet serve` runs each flow in a process of its own, where the key may not be in
the environment. The key is never a flow parameter (Prefect records those): the flow reads the block
here, in the flow layer (connectors know nothing of Prefect), and puts the key where the tasks read
their settings, this process's environment, for the run's length only (an in-process run, a test's,
leaves the environment as it found it). It is never logged.

    python -c "import getpass; from prefect.blocks.system import Secret; Secret(value=getpass.getpass('key: ')).save('vds-api-key')"
"""

from __future__ import annotations

import contextlib
from typing import Any
from collections.abc import Iterator

from fleet_data.tasks.errors import UsageError
from fleet_data.tasks.settings import client_settings, exported

SECRET_BLOCK = "vds-api-key"


class MissingKey(UsageError, ValueError):
    """No key anywhere a flow run looks for one."""


def secret_block_key(name: str | None = None) -> str | None:
    """The key saved in the Prefect Secret block `name` (default SECRET_BLOCK), or None when there is no such block."""
    from prefect.blocks.system import Secret

    try:
        # _sync: the block is read from sync code, inside or outside a flow (Prefect's own keyword).
        block: Any = Secret.load(name or SECRET_BLOCK, _sync=True)  # type: ignore[call-arg]
    except ValueError:  # Prefect's "Unable to find block document named ..."
        return None
    value = block.value.get_secret_value()  # not .get(): it would turn a key of digits into a number
    return str(value) if value else None


@contextlib.contextmanager
def key_for_this_run(needed: bool = True) -> Iterator[None]:
    """Make sure the tasks find a key: the environment's, else the Secret block's; refuse if `needed` and none.

    With no key but a `VDS_BASE_URL` (a service that takes none, or a test's refusal), the run goes on:
    the service is the judge.
    """
    settings = client_settings()
    if settings.api_key:
        yield
        return
    key = secret_block_key()
    if key is None:
        if needed and not settings.base_url:
            raise MissingKey(f"no service key: set VDS_API_KEY in the environment of the worker (or `fleet serve`), "
                             f"or save it in a Prefect Secret block named {SECRET_BLOCK!r}")
        yield
        return
    with exported(VDS_API_KEY=key):  # where the run's tasks read it; never a parameter
        yield
