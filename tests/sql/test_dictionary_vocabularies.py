"""The data dictionary names every value the code can write where a column holds a fixed vocabulary (issue 30:
rejected_rows.reason left out the plate reasons). Read against the code's own constants, so a new reason fails
here until the dictionary says what it means."""

from __future__ import annotations

import re

from fleet_data.tasks.ingest import plates, vins
from fleet_data.tasks.store import dictionary


def test_the_plate_reasons_are_the_ones_the_plate_code_declares():
    declared = {v for k, v in vars(plates).items() if k.startswith("PLATE_") and isinstance(v, str)}
    assert declared == set(plates.PLATE_REJECT_REASONS)
    assert set(plates.OUTCOME_REASONS.values()) <= declared


def test_rejected_rows_reason_names_every_reason_the_code_writes():
    described = dictionary.load()["rejected_rows"].columns["reason"]
    named = set(re.findall(r"[a-z_]+", described))
    assert set(vins.REJECT_REASONS) | set(plates.PLATE_REJECT_REASONS) <= named
