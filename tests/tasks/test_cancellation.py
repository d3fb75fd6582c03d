"""A cancelled run (SIGTERM/SIGINT: tasks/control/signals.py) stops calling and stops waiting.

Whatever waits notices the cancellation within a fraction of a second: a retry sitting out the spec's
`Retry-After: 60`, a recall batch between two polls, plate lookups. What it was waiting for stays
pending (not failed), due again next run. Each wait below is bounded by `wait_for(..., 30)`, which only
a wait that ignores the cancellation can reach (60 s per retry, a 60 s poll interval).
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from fleet_data.connectors import Settings
from fleet_data.connectors.sandbox import FaultConfig, SandboxConfig, run_sandbox
from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.fetch.enrich import fetch_chunk
from fleet_data.tasks.fetch.plates import look_up_plates
from fleet_data.tasks.recalls.batches import BatchOptions, run_recall_batches
from fleet_data.tasks.control.stops import CANCELLED, Stopped, Stops

from .test_recall_batches import vins

BOUND = 30  # seconds: far below one ignored Retry-After or poll interval (60 s)


def cancel_soon(stops: Stops, after: float = 0.5) -> threading.Timer:
    """Cancel from another thread, as the signal handler does."""
    timer = threading.Timer(after, stops.cancel)
    timer.start()
    return timer


@pytest.fixture
def failing():
    """Every call answers 503 with the spec's Retry-After of 60 s."""
    with run_sandbox(SandboxConfig(faults=FaultConfig(rate=1.0, statuses=[503]))) as sb:
        yield sb


def test_a_cancelled_run_admits_no_call_and_its_pauses_end_early():
    stops = Stops()

    async def scenario() -> tuple[bool, bool]:
        cancel_soon(stops)
        woke = await asyncio.wait_for(stops.pause(120, "specs"), BOUND)
        with pytest.raises(Stopped) as refused:
            await stops.call("specs", lambda: asyncio.sleep(0), lambda leave: None)
        assert refused.value.reason == CANCELLED
        return woke, await stops.pause(5)

    assert asyncio.run(scenario()) == (True, True)
    assert stops.cancelled and stops.reason("anything") == CANCELLED


def test_a_retry_waiting_out_retry_after_ends_and_its_vin_stays_pending(failing):
    stops = Stops()
    rows = [{"vin": v} for v in vins(6)]
    cancel_soon(stops)
    result = asyncio.run(asyncio.wait_for(fetch_chunk(
        "specs",
        rows,
        calls=Calls(settings=Settings(api_key="k", base_url=failing.url), concurrency=3, stops=stops),
    ), BOUND))
    assert sorted(result.pending) == sorted(r["vin"] for r in rows) and result.failed == []
    assert result.stop_reason == CANCELLED
    # Each VIN's first call (the scheduler's slots serve the others while a retry waits out its Retry-After),
    # and none retried after the stop.
    assert failing.count("/specs") == len(rows)
    assert all(record.will_retry for _, record, _, _ in result.calls)


def test_plate_lookups_stop_and_their_plates_are_not_looked_up(failing):
    stops = Stops()
    keys = [("US", "TX", f"ABC{i:03d}") for i in range(4)]
    cancel_soon(stops)
    lookups = asyncio.run(asyncio.wait_for(look_up_plates(
        keys,
        calls=Calls(settings=Settings(api_key="k", base_url=failing.url), concurrency=2, stops=stops),
    ), BOUND))
    assert sorted(lookups.not_looked_up) == sorted(keys) and lookups.results == {}
    assert lookups.stop_reason == CANCELLED


def test_a_batch_poll_ends_and_the_batch_is_left_for_the_next_run(store, tmp_path):
    with run_sandbox(SandboxConfig(batch_vins_per_second=0.01)) as sandbox:  # never done in this test's time
        stops = Stops()
        due = vins(5)
        settings = Settings(api_key="k", base_url=sandbox.url)
        cancel_soon(stops, after=1.0)
        outcome = asyncio.run(asyncio.wait_for(run_recall_batches(
            store, "r1", due, calls=Calls(settings, stops=stops), batches=BatchOptions(tmp_path / "batches", poll_interval=60),
        ), BOUND))
    assert (outcome.submitted, outcome.pending, outcome.checked) == (1, 5, 0)
    assert outcome.stop_reason == CANCELLED
    unfinished = store.query("unfinished_recall_batches")
    assert unfinished.height == 1 and not unfinished["batch_id"][0].startswith("pending:")  # polled, never resubmitted


_HELD = """
import os, signal, sys, time
from fleet_data.tasks.control.signals import RunCancelled, cancel_on_signals, held

with cancel_on_signals("held-run", started=False):
    try:
        with held():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # without the hold, the handler raises here
            print("block ended", flush=True)
    except RunCancelled:
        print("raised after", flush=True)
"""


def test_a_stop_signal_in_a_held_block_is_raised_once_the_block_ends():
    """pydantic's serializers wrapped the `RunCancelled` a signal raised inside them into an error of their own
    (Prefect's settings, read as its server starts: the command ended as a bug). In a process of its own: a
    handled signal marks the whole process stopping."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _HELD], capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.split("\n")[:2] == ["block ended", "raised after"], done.stdout + done.stderr
