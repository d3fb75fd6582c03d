"""Fetch turns: one chunk of a dataset calls at a time; datasets do not wait for each other."""

from __future__ import annotations

import threading
import time

from fleet_data.tasks.fetch.lanes import fetch_turn, forget_run


def test_one_turn_at_a_time_per_dataset_and_datasets_do_not_wait_for_each_other():
    inside: dict[str, int] = {"specs": 0, "history": 0}
    most = {"specs": 0, "history": 0}
    guard = threading.Lock()

    def chunk(dataset: str) -> None:
        with fetch_turn("run-a", dataset):
            with guard:
                inside[dataset] += 1
                most[dataset] = max(most[dataset], inside[dataset])
                both = inside["specs"] and inside["history"]
                most["both"] = max(most.get("both", 0), 1 if both else 0)
            time.sleep(0.02)
            with guard:
                inside[dataset] -= 1

    threads = [threading.Thread(target=chunk, args=(d,)) for d in ["specs", "history"] * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert most["specs"] == 1 and most["history"] == 1  # never two chunks of one dataset calling
    assert most["both"] == 1  # but two datasets do call side by side
    forget_run("run-a")
