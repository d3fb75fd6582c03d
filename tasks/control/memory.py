"""Memory short: one line and exit code 8 (tasks/exitcodes.py), never a crash signal or a traceback.

An allocation refused inside the big steps (reading the fleet files, planning, landing the roster: Python's
MemoryError, Arrow's ArrowMemoryError, DuckDB's OutOfMemoryException, a polars error that says so) is
`OutOfMemory` (`guarded`, `refused`), and the command ends with one line naming the step and the limit that
binds (`headroom`: the address space, `ulimit -v`, less what is mapped; a container's memory limit; the
machine's `MemAvailable`).

Under an address-space limit the libraries' own reservations matter, not only what they use: glibc gives
each thread a malloc arena of 64 MB of address space, Arrow's mimalloc reserves 1 GB up front, polars'
jemalloc keeps every range it ever mapped. The sample fleet's dry run mapped 2.8 GB to hold 240 MB. Then a
library fails a tiny allocation at a random place: a Rust abort (exit 134), a segfault (139), or, when the
thread polars' streaming reader wants cannot be created (its stack cannot be mapped: pthread_create says
EAGAIN, which tokio's blocking pool takes for "try later" and queues the read for a thread that never
comes), a hang at 0 CPU. Threads are the other cost: each maps its stack, 8 MB by default (`ulimit -s`),
and a refresh runs about 120 (Prefect's, the fetch tasks', each DuckDB's). So under such a limit,
`lean_when_limited` (called first thing by the command) makes them map what they use: two malloc arenas,
Arrow on the system allocator, jemalloc giving ranges back, at most four polars threads, new threads' stacks
of 2 MB (Rust's own size), DuckDB's memory and threads bounded (`duckdb_config`: each database of DuckDB 2
starts 8 I/O threads, and every fetch thread has one); the dry run of the sample fleet then maps about
850 MB. A Rust abort cannot be caught: checking each step's need before it starts is not done yet (a dry run of
1M rows under a 1,000 MB limit still ends in polars' abort, exit 134, while reading).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from fleet_data.tasks import exitcodes
from fleet_data.tasks.errors import FleetError

MB = 1024 * 1024
M_ARENA_MAX = -8  # glibc's mallopt parameter
THREAD_STACK = 2 * MB  # under an address-space limit, the stack a thread maps when its creator names no size
# What the command maps before any step (Python, polars, Arrow, DuckDB, Prefect loaded, the lean settings on):
# under an address-space limit below this, it stops at once rather than fail in an import.
START_BYTES = 900 * MB
# Under an address-space limit, DuckDB's buffer pool gets this share of the headroom (it spills the rest to disk).
DUCKDB_SHARE = 0.4
# Under an address-space limit: what each library is told before it loads (a setting the user made is kept).
LEAN = {
    "MALLOC_ARENA_MAX": "2",  # glibc: two malloc arenas, not 8 per core (64 MB of address space each)
    "ARROW_DEFAULT_MEMORY_POOL": "system",  # Arrow: malloc, not mimalloc's 1 GB reservation
    "_RJEM_MALLOC_CONF": "retain:false",  # polars' jemalloc: give unused ranges back instead of keeping them mapped
    "POLARS_MAX_THREADS": str(min(os.cpu_count() or 1, 4)),  # polars: a thread (and its stack) per core, at most 4
}


class OutOfMemory(FleetError):
    """The step cannot have the memory it needs: one line, exit code 8."""

    code = exitcodes.NO_MEMORY

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Headroom:
    free: int | None  # bytes the command may still take; None: no limit could be read
    limit: str  # what binds, in the user's words


ADVICE = "raise the limit, or refresh a large fleet in smaller files, one after the other: nothing paid is bought twice"
READ, PLAN, LAND = "read the fleet files", "plan the refresh", "land the roster"


def address_space_limit() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft


def _status(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup() -> tuple[int, int] | None:
    """(limit, usage) of this process's cgroup when it has a memory limit (v2, else v1)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2
            folder = Path("/sys/fs/cgroup") / path.lstrip("/")
            limit, usage = _read_int(folder / "memory.max"), _read_int(folder / "memory.current")
        elif "memory" in controllers.split(","):
            folder = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            limit, usage = _read_int(folder / "memory.limit_in_bytes"), _read_int(folder / "memory.usage_in_bytes")
        else:
            continue
        if limit is not None and usage is not None and limit < 1 << 60:  # v1 says "no limit" with a huge number
            return limit, usage
    return None


def _available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _mb(n: int) -> str:
    return f"{n / MB:,.0f} MB"


def headroom() -> Headroom:
    """How much more memory this process may take, and which limit says so."""
    found: list[tuple[int, str]] = []
    limit, mapped = address_space_limit(), _status("VmSize")
    if limit is not None and mapped is not None:
        found.append((limit - mapped, f"the address-space limit (ulimit -v) of {_mb(limit)}"))
    group = _cgroup()
    if group is not None:
        found.append((group[0] - group[1], f"the container's memory limit of {_mb(group[0])}"))
    available = _available()
    if available is not None:
        found.append((available, "the memory available on this machine"))
    if not found:
        return Headroom(None, "no memory limit found")
    free, what = min(found)
    return Headroom(max(free, 0), what)


def refused(exc: BaseException | None) -> BaseException | None:
    """The refused allocation in `exc` or what caused it, if there is one."""
    seen = 0
    while exc is not None and seen < 8:  # bounded: a cause chain may loop
        if isinstance(exc, OutOfMemory):
            return exc
        if isinstance(exc, MemoryError):  # Python's, numpy's, and Arrow's ArrowMemoryError
            return exc
        module = type(exc).__module__
        if module.startswith(("_duckdb", "duckdb")) and type(exc).__name__ == "OutOfMemoryException":
            return exc
        if module.startswith("polars") and any(w in str(exc).lower() for w in ("out of memory", "memory allocation")):
            return exc
        if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc) and address_space_limit():
            return exc  # its stack could not be mapped
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def out_of_memory_line(exc: BaseException, step: str | None = None) -> str:
    """One line for an allocation refused while doing `step` (or anything, when None)."""
    if isinstance(exc, OutOfMemory):
        return exc.reason
    first = next((line for line in str(exc).splitlines() if line.strip()), "")  # DuckDB's advice follows it
    text = " ".join(first.split())[:160] or "no message"
    room = headroom()
    doing = f" while trying to {step}" if step else ""
    return f"out of memory{doing} ({type(exc).__name__}: {text}) under {room.limit}; {ADVICE}"


@contextmanager
def guarded(step: str) -> Iterator[None]:
    """A refused allocation inside the block is `OutOfMemory`, naming `step` (any other error passes as it is)."""
    try:
        yield
    except BaseException as exc:  # noqa: BLE001 - a polars PanicException is a BaseException
        cause = refused(exc)
        if cause is None or isinstance(exc, OutOfMemory):
            raise
        raise OutOfMemory(out_of_memory_line(cause, step)) from exc


def lean_when_limited() -> None:
    """Under an address-space limit, have the libraries map only what they use (see the module's docstring).

    Called before polars, Arrow or DuckDB are imported; the environment carries it to the processes this one
    starts (Prefect's server, `--workers`).
    """
    if address_space_limit() is None:
        return
    # Set for the processes this one starts too; a value the user set wins (setdefault returns it).
    chosen = {variable: os.environ.setdefault(variable, value) for variable, value in LEAN.items()}
    found = ctypes.util.find_library("c")
    if not found or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(found)
        libc.mallopt(M_ARENA_MAX, int(chosen["MALLOC_ARENA_MAX"]))  # this process too
        attr = ctypes.create_string_buffer(128)  # a pthread_attr_t (56 bytes on x86_64)
        if libc.pthread_attr_init(attr) == 0 and libc.pthread_attr_setstacksize(attr, ctypes.c_size_t(THREAD_STACK)) == 0:
            libc.pthread_setattr_default_np(attr)  # Python's threads, DuckDB's, Arrow's: what they map for a stack
    except (OSError, AttributeError, ValueError):
        pass  # not glibc: the defaults stay


def check_start() -> None:
    """Stop at once when the address-space limit is below what the command maps before any step."""
    limit = address_space_limit()
    if limit is not None and limit < START_BYTES:
        raise OutOfMemory(f"the address-space limit (ulimit -v) of {_mb(limit)} is below what fleet needs to start, "
                          f"about {_mb(START_BYTES)}; raise it")


def duckdb_config(share: float | None = DUCKDB_SHARE) -> dict[str, str | bool | int | float | list[str]]:
    """A DuckDB database's threads and memory limit under an address-space limit (DuckDB cannot see one: it would
    plan for the machine's RAM and fail an allocation): two workers and one I/O thread, and `share` of the
    headroom now (None: no limit of its own, for a small database in memory that cannot spill); nothing
    otherwise (DuckDB sees a container's limit itself)."""
    if address_space_limit() is None:
        return {}
    # Each DuckDB database runs its own threads: `threads` workers and `async_threads` for I/O (8 by default).
    config: dict[str, str | bool | int | float | list[str]] = {"threads": min(os.cpu_count() or 1, 2), "async_threads": 1}
    room = headroom()
    if share is not None and room.free is not None:
        config["memory_limit"] = f"{max(int(room.free * share) // MB, 64)}MB"
    return config
