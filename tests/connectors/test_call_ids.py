"""Call ids and Idempotency-Keys: unique like a uuid4's, without a uuid4 (a system call) per call."""

from __future__ import annotations

import multiprocessing
import re

from fleet_data.connectors.calls import UniqueHex


def _draw(ids: UniqueHex, queue: multiprocessing.Queue) -> None:
    queue.put([next(ids) for _ in range(3)])


def test_ids_are_32_hex_digits_and_never_repeat_even_in_a_forked_child():
    ids = UniqueHex()
    here = [next(ids) for _ in range(1000)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in here) and len(set(here)) == 1000
    context = multiprocessing.get_context("fork")  # a --workers process starts as a copy of this one
    queue = context.Queue()
    children = [context.Process(target=_draw, args=(ids, queue)) for _ in range(2)]
    for child in children:
        child.start()
    drawn = [queue.get(timeout=30) for _ in children]
    for child in children:
        child.join(30)
    after = [next(ids) for _ in range(3)]
    every = here + after + drawn[0] + drawn[1]
    assert len(set(every)) == len(every)
