"""A fleet run and its Prefect flow run, linked both ways; a run that raises is recorded as failed.

- In Prefect, the flow run's **name is our `run_id`** (`flow_run_name=run_name`). `fleet` gives the run
  id (it takes the database lock with it before Prefect starts); a worker's or `fleet serve`'s run has
  none, so one is chosen as the flow run starts, and the flow adopts its name as its `run_id`.
- Its **tags** name the fleet file(s) and the datasets: `fleet-file:<file name>`, `dataset:<name>`. A
  deployment's flow run exists before its flow starts, and Prefect's `tags` context only tags runs
  created inside it, so the tags are added through the flow-run API, keeping the run's own (a
  deployment's `fleet`).
- In our tables, `runs.prefect_flow_run_id` holds the flow run's id (recorded by the run's first task).

    @flow(name="fleet-refresh", flow_run_name=run_name)
    @as_flow_run              # run id, name, tags; the key from a Secret block (flows/apikey.py)
    @holds_run_lock("refresh")
    @records_failure          # inside the lock: the run's row says `failed`, not `running`
    def refresh_fleet(paths, db, ..., run_id=None): ...
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

from fleet_data.tasks.run.context import new_run_id
from fleet_data.tasks.settings import option_argument

from .apikey import key_for_this_run

F = TypeVar("F", bound=Callable[..., Any])
RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{6,8}")
MESSAGE_LENGTH = 300
logger = logging.getLogger(__name__)


def run_name() -> str:
    """`flow_run_name` of the fleet flows: the `run_id` parameter, else a new run id (the flow adopts it)."""
    from prefect.runtime import flow_run

    return str(flow_run.parameters.get("run_id") or new_run_id())


def run_tags(arguments: dict[str, Any]) -> list[str]:
    """`fleet-file:<name>` for each fleet file (as given: a file, folder or glob), `dataset:<name>` for each dataset."""
    from fleet_data.tasks.plan.due import DEFAULT_DATASETS

    files = [f"fleet-file:{Path(str(p)).name}" for p in arguments.get("paths") or []]
    datasets = option_argument(arguments, "datasets") or (DEFAULT_DATASETS if "paths" in arguments else [])
    return list(dict.fromkeys(files + [f"dataset:{d}" for d in datasets]))


def as_flow_run(fn: F | None = None, *, needs_key: bool = True) -> Any:
    """Give the flow its run id, name and tag its flow run, and find the service key (see the module docstring).

    Goes between `@flow` and `@holds_run_lock`, which then takes the lock with this run id. A flow that
    calls nothing (a re-parse) says `needs_key=False`; a dry run needs none either.
    """
    if fn is None:
        return functools.partial(as_flow_run, needs_key=needs_key)
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        from prefect.context import FlowRunContext

        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        context = FlowRunContext.get()
        if context is not None and context.flow_run is not None:
            flow_run = context.flow_run
            given = bound.arguments.get("run_id")
            run_id = given or (flow_run.name if RUN_ID.fullmatch(flow_run.name or "") else new_run_id())
            bound.arguments["run_id"] = run_id
            _name_and_tag(flow_run.id, run_id if run_id != flow_run.name else None,
                          list(dict.fromkeys([*flow_run.tags, *run_tags(bound.arguments)])))
        if not needs_key:
            return fn(*bound.args, **bound.kwargs)
        with key_for_this_run(needed=not option_argument(bound.arguments, "dry_run", False)):
            return fn(*bound.args, **bound.kwargs)

    # The flow's annotations resolved where it is defined: Prefect builds its parameter model from this
    # signature in this module's namespace, where `RefreshOptions` is not a name.
    run.__signature__ = inspect.signature(fn, eval_str=True)  # type: ignore[attr-defined]
    return run


def _name_and_tag(flow_run_id: UUID, name: str | None, tags: list[str]) -> None:
    """One PATCH of the flow run; a server that refuses it costs the run its labels, not its work."""
    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            client.update_flow_run(flow_run_id, name=name, tags=tags)
    except Exception as exc:  # noqa: BLE001 - labels are worth a warning, never a failed run
        logger.warning("could not name and tag flow run %s: %s", flow_run_id, exc)


def records_failure(fn: F) -> F:
    """Record the run `failed`, with the error in one line, when the flow raises (then raise on).

    Goes right above the flow's function, inside `@holds_run_lock`, so the record is published with
    the run. Only a run still `running` changes: one that finished, or never started, stays as it is.
    A signal is not a failure here: what a cancelled run records is the cancellation's business.
    """
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            _record_failure(option_argument(bound.arguments, "db"), bound.arguments["run_id"], exc)
            raise

    return run  # type: ignore[return-value]


def failure_message(exc: BaseException) -> str:
    """`Type: message` on one line, cut short, a key in a URL or the key itself redacted (never expected there)."""
    from fleet_data.connectors.redact import redact_text
    from fleet_data.tasks.settings import client_settings

    key = client_settings().api_key
    text = redact_text(" ".join(f"{type(exc).__name__}: {exc}".split()), (key,) if key else ())
    return text if len(text) <= MESSAGE_LENGTH else text[: MESSAGE_LENGTH - 1] + "…"


def _record_failure(db: str, run_id: str, exc: BaseException) -> None:
    from fleet_data.tasks.run.context import current

    try:
        current(run_id).store.fail_run(run_id, failure_message(exc), datetime.now(UTC))
    except Exception as again:  # noqa: BLE001 - the run's own error is the one to raise
        logger.warning("could not record run %s as failed: %s", run_id, again)
