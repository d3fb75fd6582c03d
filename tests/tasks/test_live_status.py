"""The live status line (the run's progress file, what `fleet status` shows of a run in flight) never says more
done than due: recall campaign details were counted against the details due before any batch landed
("recall_details 325/0", issue 30). Their total now grows as each batch lands."""

from __future__ import annotations

import asyncio

import polars as pl

from fleet_data.tasks.control.calls import Calls
from fleet_data.tasks.recalls.batches import BatchOptions
from fleet_data.tasks.recalls.pipeline import DetailsProgress, check_recalls_and_details
from fleet_data.tasks.run.progressfile import ProgressFile, read_progress

from .test_recall_scheduling import with_recalls

KEY = "recall_details"


class Watched(ProgressFile):
    """The progress file, with what it said after each step of the details' bar."""

    def __init__(self, *args):
        self.seen: list[tuple[int, int]] = []
        super().__init__(*args)

    def _note(self) -> None:
        entry = self.state["datasets"].get(KEY)
        if entry:
            self.seen.append((entry["done"], entry["total"]))

    def start(self, key, description, total):
        super().start(key, description, total)
        self._note()

    def advance(self, key, amount=1):
        super().advance(key, amount)
        self._note()


def test_the_details_bar_counts_in_each_batch_as_it_lands_and_never_runs_past_its_total(store, settings, tmp_path):
    due = with_recalls(8)
    store.land("vehicles", pl.DataFrame({"vin": due}), "r1")
    bar = Watched(tmp_path / "fleet.duckdb", "r1", "refresh", "now")
    # As the refresh's check-recalls task wires it (tasks/steps/refresh_tasks.py).
    batches, details = asyncio.run(check_recalls_and_details(
        store, "r1", due, calls=Calls(settings(), concurrency=4), batches=BatchOptions(tmp_path / "b", 3, poll_interval=0.05),
        details_progress=DetailsProgress(done=lambda n: bar.advance(KEY, n),
                                         due=lambda n: bar.start(KEY, "Recall campaign details", n))))
    assert batches.checked == 8 and details.due >= 6 and details.by_vin == details.due
    assert all(done <= total for done, total in bar.seen), bar.seen
    assert len({total for _, total in bar.seen}) >= 2  # the total grew as the batches (of 3 VINs) landed
    bar.write(force=True)
    assert read_progress(tmp_path / "fleet.duckdb")["datasets"][KEY] == {
        "description": "Recall campaign details", "done": details.due, "total": details.due}


def test_a_bar_started_again_keeps_what_it_has_done(tmp_path):
    bar = ProgressFile(tmp_path / "fleet.duckdb", "r1", "refresh", "now")
    bar.start(KEY, "Recall campaign details", 3)
    bar.advance(KEY, 2)
    bar.start(KEY, "Recall campaign details", 10)
    assert bar.state["datasets"][KEY] == {"description": "Recall campaign details", "done": 2, "total": 10}
