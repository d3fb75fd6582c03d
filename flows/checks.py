"""Check first: everything a command can tell is wrong before it starts anything.

Arguments, paths (the database, its staging folder, the lake: of the right kind, writable) and the
service's settings are checked here, before a database is opened, a lock or staging file is written,
or the sandbox or Prefect starts; the store's provenance (`check_refresh_store`) as Prefect's server starts,
which stops if it is refused. A problem is a `CommandError`: one line (what, why, what to do) and
an exit code (2 for usage), printed by flows/cli/errors.py as text or, with `--json`, as JSON. Nothing here
creates anything, and only the standard library and small project modules are imported.
"""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path
from typing import Sequence
from urllib.parse import urlsplit

from fleet_data.tasks.errors import UsageError
from fleet_data.tasks.exitcodes import USAGE

LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")


class CommandError(UsageError):
    """The command stops here: one line for the user, and the exit code."""

    def __init__(self, message: str, code: int = USAGE):
        super().__init__(" ".join(str(message).split()))  # one line, even for DuckDB's messages
        self.message, self.code = str(self), code


# --- per command ---------------------------------------------------------------------------------


def check_refresh(args: argparse.Namespace) -> None:
    """What the options' grammars cannot tell (tasks/settings.py checked each value as it was read)."""
    run_paths(args.db, args.lake)
    if args.webhook_url:
        webhook_url(args.webhook_url)
    if args.webhook_listen:
        webhook_listen(args.webhook_listen)
    if args.notify:
        from fleet_data.connectors.notify import NotifyError, validate_url

        try:
            validate_url(args.notify)
        except NotifyError as exc:
            raise CommandError(f"--notify: {exc}") from None
    if args.dask and not args.dry_run:
        dask_scheduler(args.dask)
    service(needs_calls=not args.dry_run)


def check_refresh_store(args: argparse.Namespace) -> None:
    """The database lets the refresh start (`provenance`); apart from `check_refresh`, as it loads DuckDB and
    reads the store: a run launches Prefect's server first (flows/commands.py). A dry run tells what the refresh
    would do: refused too, with the same line."""
    provenance(args.db, calls=True, allow_clock_behind=args.allow_clock_behind)


def check_backfill(args: argparse.Namespace) -> None:
    run_paths(args.db, args.lake)
    if args.vins_file:
        readable_file(args.vins_file, "--vins-file")
    if args.vins:
        new_database_vins(args.db, [v for item in args.vins for v in item.split(",") if v.strip()])
    if not args.reparse:  # re-parsing calls nothing, nor does a dry run
        service(needs_calls=not args.dry_run)
    provenance(args.db, calls=not args.reparse, allow_clock_behind=args.allow_clock_behind)  # a dry run too, as refresh


def check_status(args: argparse.Namespace) -> None:
    if args.runs < 1:
        raise CommandError(f"--runs {args.runs}: show 1 run or more")
    not_a_folder(args.db, "--db")


def check_serve(args: argparse.Namespace) -> None:
    readable_file(args.fleet_file, "FLEET_FILE")
    run_paths(args.db, args.lake)
    service(needs_calls=False)  # the key may be in a Prefect Secret block: flows/serve.py looks there once Prefect is up


# --- arguments -----------------------------------------------------------------------------------


def datasets(text: str, allowed: Sequence[str] | None = None) -> list[str]:
    from fleet_data.tasks.plan.due import ALL_DATASETS

    allowed = allowed or ALL_DATASETS
    chosen = [d.strip() for d in (text or "").split(",") if d.strip()]
    unknown = [d for d in chosen if d not in allowed]
    if unknown:
        raise CommandError(f"unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(allowed)}")
    return chosen


def fresh_flags(items: list[str]) -> dict[str, str]:
    """`--fresh DATASET=AGE` (repeatable) as a dict; the windows themselves are checked by `fresh`."""
    bad = [i for i in items if "=" not in i]
    if bad:
        raise CommandError(f"--fresh {bad[0]}: takes DATASET=AGE, e.g. market_value=14d")
    return dict(item.split("=", 1) for item in items)


def webhook_url(url: str) -> None:
    parts = urlsplit(url)
    local = parts.scheme == "http" and (parts.hostname or "") in LOOPBACK  # only an embedded sandbox reaches it
    if not parts.hostname or (parts.scheme != "https" and not local):
        raise CommandError(f"--webhook-url {url}: the service posts to an https URL only; give the https address "
                           "that reaches --webhook-listen (e.g. https://hooks.example.com/fleet)")


def dask_scheduler(address: str, timeout: float = 10.0) -> None:
    """`--dask`: a scheduler listens there (its workers are checked once Prefect is up: flows/fetchers.py)."""
    parts = urlsplit(address)
    try:
        port = parts.port or 8786
    except ValueError:
        port = -1
    if parts.scheme not in ("tcp", "tls") or not parts.hostname or not 0 < port < 65536:
        raise CommandError(f"--dask {address}: write the scheduler's address as tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786")
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except OSError as exc:
        raise CommandError(f"--dask {address}: no Dask scheduler answers there ({exc.strerror or exc}); start one "
                           "with `dask scheduler`, or fix the address") from None


def webhook_listen(address: str) -> None:
    host, colon, port = address.rpartition(":")
    if not colon:
        raise CommandError(f"--webhook-listen {address}: write HOST:PORT, e.g. 0.0.0.0:8080")
    if not port.isdigit():
        raise CommandError(f"--webhook-listen {address}: the port {port!r} is not a number; write HOST:PORT, "
                           "e.g. 0.0.0.0:8080")
    if not 1 <= int(port) <= 65535:
        raise CommandError(f"--webhook-listen {address}: the port must be 1 to 65535")
    try:  # the receiver starts only once the batch is paid for: find out now whether it can
        with socket.create_server((host.strip("[]") or "127.0.0.1", int(port))):
            pass
    except OSError as exc:
        raise CommandError(f"--webhook-listen {address}: cannot listen there ({exc.strerror or exc}); "
                           "choose a free port on an address of this machine") from None


def new_database_vins(db: str, given: list[str]) -> None:
    """Without a database there is no roster: a VIN is accepted only if valid, known without taking the lock.

    With a database, VINs on its roster are accepted whatever they look like: that check runs under the lock.
    """
    from fleet_data.tasks.store.files import exists
    from fleet_data.tasks.ingest.vins import reject_reason

    if exists(db):
        return
    refused = [(raw, reason) for raw in given if (reason := reject_reason(raw))]
    if refused:
        raise CommandError(f"not valid VINs ({db} does not exist yet, so no VIN is on a roster): "
                           + ", ".join(f"{raw} ({reason})" for raw, reason in refused))


# --- paths ---------------------------------------------------------------------------------------


def run_paths(db: str, lake: str | None) -> None:
    """The database file, the staging folder beside it, the lake: of the right kind and writable."""
    database = Path(db)
    not_a_folder(db, "--db")
    writable_file(database, "--db")
    writable_folder(database.resolve().parent / "staging", "the staging folder beside --db")
    if lake:
        writable_folder(Path(lake), "--lake")
        writable_tree(Path(lake), "--lake")


def writable_tree(root: Path, what: str, limit: int = 20_000) -> None:
    """Every folder already under `root` writable: the lake's export rewrites partitions in them at the end
    of a run, after the calls were paid for. `limit` bounds the walk (a lake has tens to hundreds of folders)."""
    if not root.is_dir():
        return
    for seen, (folder, _, _) in enumerate(os.walk(root)):
        if seen >= limit:
            return
        if not os.access(folder, os.W_OK | os.X_OK):
            raise CommandError(f"{what} {root}: {folder} is not writable; fix its permissions (the run rewrites "
                               "the lake's partitions there) or choose another --lake")


def not_a_folder(db: str, flag: str) -> None:
    if Path(db).is_dir():
        raise CommandError(f"{flag} {db}: is a folder; give the database file, e.g. {Path(db) / 'fleet.duckdb'}")


def writable_file(path: Path, what: str) -> None:
    if path.exists():
        if not os.access(path, os.W_OK):
            raise CommandError(f"{what} {path}: not writable; fix its permissions or choose another path")
        return
    _creatable(path, what)


def writable_folder(path: Path, what: str) -> None:
    if path.exists():
        if not path.is_dir():
            raise CommandError(f"{what} {path}: is a file, not a folder; move it away or choose another path")
        if not os.access(path, os.W_OK | os.X_OK):
            raise CommandError(f"{what} {path}: not writable; fix its permissions or choose another path")
        return
    _creatable(path, what)


def _creatable(path: Path, what: str) -> None:
    """Nothing is created here: the nearest existing folder above `path` must be a writable folder."""
    above = path.absolute().parent
    while not above.exists():
        above = above.parent
    if not above.is_dir():
        raise CommandError(f"{what} {path}: {above} is a file, not a folder; choose another path")
    if not os.access(above, os.W_OK | os.X_OK):
        raise CommandError(f"{what} {path}: {above} is not writable; fix its permissions or choose another path")


def readable_file(path: str, what: str) -> None:
    from fleet_data.tasks.ingest.file_kind import not_regular  # the standard library only

    if problem := not_regular(path):  # a FIFO, a device, a socket: read, it could wait for ever
        raise CommandError(f"{what} {path}: {problem}")
    if not Path(path).is_file():
        raise CommandError(f"{what} {path}: no such file; check the path")
    if not os.access(path, os.R_OK):
        raise CommandError(f"{what} {path}: not readable; fix its permissions")


# --- the database's provenance --------------------------------------------------------------------


def provenance(db: str, *, calls: bool, allow_clock_behind: bool) -> None:
    """The database as it stands lets this run start (tasks/plan/provenance.py): the embedded sandbox never lands
    among another service's answers (checked when the run `calls`), and this clock is not behind its last run."""
    from fleet_data.tasks.plan import provenance as held
    from fleet_data.tasks.settings import service_in_use
    from fleet_data.tasks.store.database import DatabaseError

    try:
        refused = held.refusal(held.read_published(db), db, service_in_use() if calls else None, allow_clock_behind)
    except DatabaseError as exc:
        raise CommandError(str(exc)) from None
    if refused:
        raise CommandError(refused)


# --- the service ---------------------------------------------------------------------------------


def service(needs_calls: bool) -> None:
    """Settings that can work: a key where a call is needed, a base URL that is an http(s) URL."""
    from fleet_data.tasks.settings import client_settings, deadline_settings, process_settings

    process_settings()  # FLEET_PUBLISH_SECONDS and the like: refused (naming the variable) before anything starts
    deadline_settings()  # FLEET_NOTIFY_SECONDS and the like (docs/stopping.md)
    try:
        settings = client_settings()
    except ValueError as exc:
        raise CommandError(f"{exc}; fix it in the environment or .env") from None
    if not settings.configured:
        return  # the embedded sandbox
    url = urlsplit(settings.base_url or "")
    if url.scheme not in ("http", "https") or not url.hostname:
        raise CommandError(f"VDS_BASE_URL {settings.base_url!r} is not an http(s) URL; write it as "
                           "https://api.carsxe.com, or unset it to use the public service")
    if needs_calls and not settings.api_key:
        raise CommandError("VDS_BASE_URL is set but VDS_API_KEY is not: set the key in the environment or .env "
                           "(or unset VDS_BASE_URL to use the embedded sandbox)")
