"""Where fetch tasks leave their staged answers for the lander: a folder, or object storage.

A fetch task writes its chunk's answers to a local journal (tasks/staging/journal.py) and, when the run
stages on object storage (`--staging s3://bucket/prefix`), puts the finished file there and removes
the local one. The flow's lander, the one writer, reads each file back (downloading it first when
it is remote), lands it, and deletes it. Remote paths go through fsspec (s3fs for `s3://`); the
endpoint and credentials come from the environment (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`...),
never from task parameters.

A staged file left on object storage by a killed run (or one whose landing failed) is landed by the
next run given the same `--staging`, as local journals are (tasks/staging/journal.py `land_journals`): under
the run that paid for it, then deleted. Only the runs this database recorded are landed: a store
may be shared by several databases, each landing its own runs' files.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


def is_remote(location: str | None) -> bool:
    return bool(location) and "://" in str(location) and not str(location).startswith("file://")


def _fs(url: str) -> Any:
    import fsspec  # type: ignore[import-untyped]  # only runs that stage remotely need it

    fs, _ = fsspec.core.url_to_fs(url)
    return fs


def run_prefix(staging: str, run_id: str) -> str:
    """The run's folder on object storage."""
    return f"{staging.rstrip('/')}/{run_id}/answers"


def scratch_root() -> Path:
    """Where a fetch task journals a chunk bound for object storage until the chunk is done (this machine's).

    Laid out as the staging folder is (`<run_id>/answers/`), so that a chunk killed mid-fetch on the
    flow's machine (its threads, `--workers`) leaves a journal the next run finds and lands.
    """
    return Path(tempfile.gettempdir(), "fleet-staging")


def publish(local: Path, staging: str | None, run_id: str) -> str:
    """Where the lander finds the finished journal `local`: itself, or its copy on object storage."""
    if not is_remote(staging):
        return str(local)
    assert staging is not None
    target = f"{run_prefix(staging, run_id)}/{local.name}"
    _fs(target).put_file(str(local), target)
    local.unlink(missing_ok=True)
    return target


@contextmanager
def opened(location: str) -> Iterator[Path]:
    """A local path holding the staged file for the block (downloaded first when remote)."""
    if not is_remote(location):
        yield Path(location)
        return
    folder = Path(tempfile.mkdtemp(prefix="fleet-staged-"))
    try:
        local = folder / location.rsplit("/", 1)[-1]
        _fs(location).get_file(location, str(local))
        yield local
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def exists(location: str) -> bool:
    """Whether a staged file is at `location`."""
    return bool(_fs(location).exists(location)) if is_remote(location) else Path(location).is_file()


def remove(location: str) -> None:
    """The staged file has landed."""
    if is_remote(location):
        fs = _fs(location)
        if fs.exists(location):
            fs.rm_file(location)
    else:
        Path(location).unlink(missing_ok=True)


def find(staging: str, pattern: str) -> list[str]:
    """The URLs of the files under `staging` that match the glob `pattern` (relative to it)."""
    fs = _fs(staging)
    fs.invalidate_cache()  # a listing cached by an earlier run of this process may name files since landed
    return sorted(fs.unstrip_protocol(p) for p in fs.glob(f"{staging.rstrip('/')}/{pattern}"))


def leftovers(staging: str, run_id: str) -> list[str]:
    """Staged files still on object storage under the run's prefix (the tests check none are left)."""
    fs = _fs(staging)
    prefix = run_prefix(staging, run_id)
    return [str(p) for p in fs.find(prefix)] if fs.exists(prefix) else []
