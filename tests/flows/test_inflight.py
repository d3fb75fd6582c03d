"""The chunks in flight (flows/inflight.py): each as it finishes; none waited for past a stopped run's deadline."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

from fleet_data.flows.inflight import InFlight
from fleet_data.tasks.control import stops


def test_futures_come_back_as_they_finish_with_their_tags():
    first, second = Future(), Future()
    waiting: InFlight[str] = InFlight("inflight-order")
    waiting.add(first, "a")
    waiting.add(second, "b")
    threading.Timer(0.2, second.set_result, ("B",)).start()
    assert waiting.next() == (second, "b")
    first.set_result("A")
    assert waiting.next() == (first, "a")
    assert not waiting and waiting.next() is None


def test_once_the_run_is_stopped_a_future_still_out_is_left_at_the_deadline(monkeypatch):
    monkeypatch.setenv("FLEET_STOP_SECONDS", "0.5")
    run_id = "inflight-stopped"
    stuck, done = Future(), Future()
    waiting: InFlight[tuple[str, int]] = InFlight(run_id)
    waiting.add(stuck, ("specs", 50))
    waiting.add(done, ("history", 40))
    try:
        stops.cancel_run(run_id)
        done.set_result("staged")
        assert waiting.next() == (done, ("history", 40))  # what comes back in time is still taken
        started = time.monotonic()
        assert waiting.next() is None  # ...what does not, is left
        assert time.monotonic() - started < 30  # generous: the deadline is 0.5 s, and never waited out before
        assert waiting.leave() == [("specs", 50)] and not waiting
    finally:
        stops.forget_run(run_id)
