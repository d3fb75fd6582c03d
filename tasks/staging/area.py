"""Where fetch tasks leave their staged answers for the lander: a folder, or object storage.

A fetch task writes its chunk's answers to a local journal (tasks/staging/journal.py) and, when the run
stages on object storage (`--staging s3://bucket/prefix`), puts the finished file there and removes
the local one. The flow's lander, the one writer, reads each file back (downloading it first when
it is remote), lands it, and deletes it. Remote paths go through fsspec (s3fs for `s3://`). The flow's
process finds the endpoint and credentials as any AWS client does (`AWS_*` variables, `~/.aws`, an
instance role); fetch tasks in other processes or on a Dask cluster get the flow's, resolved once
(`storage_access`), as a task parameter whose secrets are `SecretStr` (shown `**********` in Prefect and
logs): a worker needs no `AWS_*` of its own.

A staged file left on object storage by a killed run (or one whose landing failed) is landed by the
next run given the same `--staging`, as local journals are (tasks/land/recover.py `land_journals`): under
the run that paid for it, then deleted. Only the runs this database recorded are landed: a store
may be shared by several databases, each landing its own runs' files.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel, ConfigDict, SecretStr

from fleet_data.tasks.control.resources import ResourceLost
from fleet_data.tasks.control.services import object_store_lost


def is_remote(location: str | None) -> bool:
    return bool(location) and "://" in str(location) and not str(location).startswith("file://")


class StorageAccess(BaseModel):
    """How a fetch task elsewhere reaches the object storage: the flow's endpoint and credentials."""

    model_config = ConfigDict(frozen=True)

    endpoint_url: str | None = None
    region: str | None = None
    key: SecretStr | None = None
    secret: SecretStr | None = None
    token: SecretStr | None = None

    def storage_options(self) -> dict[str, Any]:
        """s3fs's keyword arguments; what is None is left to the worker's own defaults."""
        options: dict[str, Any] = {name: getattr(self, name).get_secret_value()
                                   for name in ("key", "secret", "token") if getattr(self, name) is not None}
        if self.endpoint_url:
            options["endpoint_url"] = self.endpoint_url
        if self.region:
            options["client_kwargs"] = {"region_name": self.region}
        return options


def storage_access(url: str | None) -> StorageAccess | None:
    """The flow's own endpoint and credentials for `url`, resolved by botocore as s3fs would resolve them here
    (None for a local folder or another scheme: fsspec then reads its own configuration)."""
    if not url or not str(url).startswith("s3://"):
        return None
    import botocore.session  # type: ignore[import-untyped]  # s3fs's dependency

    session = botocore.session.Session()
    try:
        client = session.create_client("s3")
        endpoint, region = client.meta.endpoint_url, client.meta.region_name
    except Exception:  # noqa: BLE001 - no region configured: the workers' defaults decide
        endpoint, region = None, None
    if endpoint and ".amazonaws.com" in endpoint:
        endpoint = None  # AWS itself: the region says which
    credentials = session.get_credentials()
    frozen = credentials.get_frozen_credentials() if credentials is not None else None
    secret = lambda value: SecretStr(value) if value else None  # noqa: E731
    return StorageAccess(endpoint_url=endpoint, region=region, key=secret(frozen and frozen.access_key),
                         secret=secret(frozen and frozen.secret_key), token=secret(frozen and frozen.token))


def _fs(url: str, access: StorageAccess | None = None) -> Any:
    import fsspec  # type: ignore[import-untyped]  # only runs that stage remotely need it

    fs, _ = fsspec.core.url_to_fs(url, **(access.storage_options() if access else {}))
    return fs


@contextmanager
def answering(location: str) -> Iterator[None]:
    """An object-store call on `location` that gets no answer (the endpoint down, refused, timed out) raises the
    run's halt (ResourceLost, SERVICE_LOST: exit code 9), never a bug; what it did not reach stays for the next run."""
    try:
        yield
    except ResourceLost:
        raise
    except Exception as exc:
        lost = object_store_lost(location, exc)
        if lost is None:
            raise
        raise lost from exc


def run_prefix(staging: str, run_id: str) -> str:
    """The run's folder on object storage."""
    return f"{staging.rstrip('/')}/{run_id}/answers"


def scratch_root() -> Path:
    """Where a fetch task journals a chunk bound for object storage until the chunk is done (this machine's).

    Laid out as the staging folder is (`<run_id>/answers/`), so that a chunk killed mid-fetch on the
    flow's machine (its threads, `--workers`) leaves a journal the next run finds and lands.
    """
    return Path(tempfile.gettempdir(), "fleet-staging")


def publish(local: Path, staging: str | None, run_id: str, access: StorageAccess | None = None) -> str:
    """Where the lander finds the finished journal `local`: itself, or its copy on object storage (reached
    with `access` when given, the flow's, else this process's own configuration)."""
    if not is_remote(staging):
        return str(local)
    assert staging is not None
    target = f"{run_prefix(staging, run_id)}/{local.name}"
    with answering(target):  # not put: the journal stays in the scratch folder, for the next run on this machine
        _fs(target, access).put_file(str(local), target)
    local.unlink(missing_ok=True)
    return target


def put_copy(data: bytes, name: str, staging: str, run_id: str, access: StorageAccess | None = None) -> str:
    """Put `data` where `publish` puts the finished file `name` (a running journal's copy: tasks/staging/mirror.py)."""
    target = f"{run_prefix(staging, run_id)}/{name}"
    with answering(target):
        _fs(target, access).pipe_file(target, data)
    return target


@contextmanager
def opened(location: str, access: StorageAccess | None = None) -> Iterator[Path]:
    """A local path holding the staged file for the block (downloaded first when remote, with `access` when given)."""
    if not is_remote(location):
        yield Path(location)
        return
    folder = Path(tempfile.mkdtemp(prefix="fleet-staged-"))
    try:
        local = folder / location.rsplit("/", 1)[-1]
        with answering(location):  # not read: it stays in the bucket for the next run
            _fs(location, access).get_file(location, str(local))
        yield local
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def reach(staging: str, access: StorageAccess | None = None) -> None:
    """List the staging prefix (a missing one is fine): raises what stops a fetch task from staging there
    (no credentials, refused ones, no such bucket, no answer)."""
    fs = _fs(staging, access)
    try:
        fs.ls(staging.rstrip("/"), refresh=True)
    except FileNotFoundError:
        fs.ls(staging.split("://", 1)[1].split("/", 1)[0], refresh=True)  # the prefix is new: its bucket must exist


def exists(location: str) -> bool:
    """Whether a staged file is at `location`."""
    if not is_remote(location):
        return Path(location).is_file()
    with answering(location):
        return bool(_fs(location).exists(location))


def remove(location: str) -> None:
    """The staged file has landed."""
    if is_remote(location):
        with answering(location):
            fs = _fs(location)
            if fs.exists(location):
                fs.rm_file(location)
    else:
        Path(location).unlink(missing_ok=True)


def find(staging: str, pattern: str, access: StorageAccess | None = None) -> list[str]:
    """The URLs of the files under `staging` that match the glob `pattern` (relative to it)."""
    with answering(staging):
        fs = _fs(staging, access)
        fs.invalidate_cache()  # a listing cached by an earlier run of this process may name files since landed
        return sorted(fs.unstrip_protocol(p) for p in fs.glob(f"{staging.rstrip('/')}/{pattern}"))


def leftovers(staging: str, run_id: str) -> list[str]:
    """Staged files still on object storage under the run's prefix (the tests check none are left)."""
    fs = _fs(staging)
    prefix = run_prefix(staging, run_id)
    return [str(p) for p in fs.find(prefix)] if fs.exists(prefix) else []


ANSWERS = "answers"  # a run's journals: <staging>/<run_id>/answers/
JOURNAL_SUFFIX = ".arrows"  # tasks/staging/journal.py writes them
RECALL_BATCHES = "recall_batches"  # batch VIN lists outlive a run: an interrupted batch is resumed by the next one
QUARANTINE = "quarantine"  # damaged journals, kept with why: never deleted by a run
REASON_SUFFIX = ".reason.txt"


@dataclass(frozen=True)
class StagingArea:
    """A run's staging area: the only code that knows its layout.

        <db folder>/staging/<run_id>/due_<dataset>.parquet    the plan's due lists (per run)
        <db folder>/staging/<run_id>/plates_waiting.parquet   rows waiting for a plate lookup
        <db folder>/staging/<run_id>/answers/*.arrows         the fetch tasks' answer journals
        <db folder>/staging/recall_batches/                   recall batches' VIN lists (outlive a run)
        <db folder>/staging/quarantine/<run_id>/<journal>     damaged journals, each beside `<journal>.reason.txt`
        <remote>/<run_id>/answers/                            with `--staging s3://...`: the journals, put there
    """

    root: Path
    run_id: str
    remote: str | None = None

    @classmethod
    def beside(cls, db: str | Path, run_id: str, remote: str | None = None) -> "StagingArea":
        return cls(Path(db).resolve().parent / "staging", run_id, remote)

    @property
    def run_dir(self) -> Path:
        return self.root / self.run_id

    @property
    def answers(self) -> Path:
        """Where this run's journals land on this machine."""
        return self.run_dir / ANSWERS

    @property
    def batches(self) -> Path:
        return self.root / RECALL_BATCHES

    @property
    def plates_waiting(self) -> Path:
        """Rows with a plate instead of a VIN, staged by the ingest for the plate lookups."""
        return self.run_dir / "plates_waiting.parquet"

    def fetch_target(self) -> str:
        """Where fetch tasks leave their staged files: the run's answers folder, or the object-storage location."""
        if self.remote:
            return self.remote if is_remote(self.remote) else run_prefix(self.remote, self.run_id)
        return str(self.answers)

    @property
    def quarantine_dir(self) -> Path:
        return self.root / QUARANTINE

    def quarantine(self, location: str, reason: str) -> Path:
        """Move the damaged journal at `location` (a path, or a URL with `--staging`) aside, with `reason` in a file
        beside it; what could be read of it has landed. Nothing in the pipeline deletes it: a person decides."""
        run = location.rstrip("/").split("/")[-3]  # <staging>/<run_id>/answers/<file>
        folder = self.quarantine_dir / run
        folder.mkdir(parents=True, exist_ok=True)
        name = location.rstrip("/").rsplit("/", 1)[-1]
        target = folder / name
        if is_remote(location):
            _fs(location).get_file(location, str(target))
            remove(location)
        else:
            shutil.move(location, target)
        (folder / (name + REASON_SUFFIX)).write_text(f"{reason}\n", encoding="utf-8")
        return target

    def quarantined(self) -> list[Path]:
        """The damaged journals kept in the quarantine folder."""
        return quarantined(self.root)

    def remove_leftovers(self) -> list[Path]:
        """Due lists other runs left behind; call it only holding the run lock (no other run is alive then)."""
        removed = []
        for leftover in self.root.glob("*"):
            if leftover.is_dir() and leftover.name not in (RECALL_BATCHES, QUARANTINE) and leftover.name != self.run_id:
                shutil.rmtree(leftover, ignore_errors=True)
                removed.append(leftover)
        return removed

    def has_journals(self) -> bool:
        return any(self.answers.glob(f"*{JOURNAL_SUFFIX}"))

    def finish(self) -> None:
        """The run is over: its due lists go; answers not landed stay for the next run."""
        if not self.has_journals():
            shutil.rmtree(self.run_dir, ignore_errors=True)


def quarantined(staging_root: Path) -> list[Path]:
    """The damaged journals kept under `staging_root`'s quarantine folder (`fleet status` counts them)."""
    return sorted(p for p in (staging_root / QUARANTINE).glob(f"*/*{JOURNAL_SUFFIX}"))


def journal_folder(target: str, run_id: str) -> Path:
    """Where a fetch task journals its chunk for `target` (`StagingArea.fetch_target`): that folder, or, bound for
    object storage, this machine's scratch folder laid out as the staging area (a chunk killed mid-fetch
    leaves its journal where the next run on this machine finds it)."""
    return scratch_root() / run_id / ANSWERS if is_remote(target) else Path(target)
