"""A chunk's earlier attempts: what a fetch task finds of its own chunk when it runs a second time.

Dask runs a task again on another worker when the worker running it is lost; the new attempt gets the same
slice of the due list. A chunk's journals are named by the chunk (`<dataset>-<offset>-<id>.arrows`), so before it
calls, the new attempt looks for the journals of the attempts before it:

- in the shared staging folder, where every call was written before it went out: all of a lost attempt's calls;
- with `--staging s3://...`, in this machine's scratch folder (a lost attempt of this machine: whole, put on object
  storage now so that the flow can land it), else on object storage: the copy a running attempt keeps there
  (tasks/staging/mirror.py), at most `mirror.AHEAD` calls behind its journal, or the finished journal of an attempt
  lost before the flow had its result. What a copy cannot show, the calls its attempt sent after it, are counted:
  the first `AHEAD` VINs of the chunk it had not settled, in the order it asks them, each as one call sent and
  never answered (`unknown`, with what it may have cost). The ledger may then hold more than was billed, never
  less; the worker's own journal, on its disk, lands at the next run on that machine.

A VIN answered there (found, no data, failed) is not asked again: its answer lands from that journal. A call sent
there and never answered (the worker died with it in flight) is in the ledger as `unknown`, since the service may
have billed it, and its VIN is asked again. The new attempt adds their calls and answers to its own figures and
hands their locations to the lander with its own journal, so they land in this run, under it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from fleet_data.connectors import ENDPOINTS, CallRecord, estimate_units
from fleet_data.connectors.calls import CALL_IDS, CallIntent
from fleet_data.tasks.datasets import DATASETS
from fleet_data.tasks.staging.area import StorageAccess, find, is_remote, journal_folder, opened, publish, run_prefix
from fleet_data.tasks.staging.mirror import AHEAD
from fleet_data.tasks.staging.chunk import ChunkResult
from fleet_data.tasks.staging.journal import NO_ANSWER, SUFFIX, Journal, read_journal

ANSWERED = ("found", "no_data", "failed")  # a VIN settled by an answer; `pending` (stopped) is asked again


def chunk_name(dataset: str, offset: int | None) -> str:
    """The start of a chunk's journal names: the dataset and the chunk's offset in the due list."""
    return dataset if offset is None else f"{dataset}-{offset}"


@dataclass
class EarlierAttempts:
    """The journals earlier attempts of one chunk left where this run stages, read."""

    locations: list[str] = field(default_factory=list)  # where the lander finds them
    journals: list[Journal] = field(default_factory=list)
    behind: bool = False  # one is a running attempt's copy, which may be `AHEAD` calls behind its journal

    @classmethod
    def of(cls, target: str, run_id: str, dataset: str, offset: int | None,
           access: StorageAccess | None = None) -> "EarlierAttempts":
        """Those of the chunk at `offset` of `dataset` under `target` (`StagingArea.fetch_target`); none for a chunk
        without an offset (a fetch outside a refresh's due list)."""
        found = cls()
        if offset is None:
            return found
        pattern = f"{chunk_name(dataset, offset)}-*{SUFFIX}"
        here = sorted(journal_folder(target, run_id).glob(pattern))
        if not is_remote(target):
            for path in here:
                found._add(str(path), read_journal(path))
            return found
        names = {path.name for path in here}
        for path in here:  # this machine's lost attempt, whole: put where the flow lands from
            journal = read_journal(path)
            found._add(publish(path, target, run_id, access), journal)
        for location in find(run_prefix(target, run_id), pattern, access):
            if location.rsplit("/", 1)[-1] not in names:
                with opened(location, access) as local:
                    found._add(location, read_journal(local))
                found.behind = True
        return found

    def _add(self, location: str, journal: Journal) -> None:
        self.locations.append(location)
        self.journals.append(journal)

    def answered(self) -> set[str]:
        """The VINs an earlier attempt was answered for."""
        return {vin for journal in self.journals for vin, outcome in journal.final_answers() if outcome in ANSWERED}

    def left(self, rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The rows still to ask: those no earlier attempt was answered for."""
        if not self.journals:
            return list(rows)
        answered = self.answered()
        return [row for row in rows if row["vin"] not in answered]

    def unseen(self, dataset: str, rows: Sequence[Mapping[str, Any]]) -> list[CallIntent]:
        """The calls a copy cannot show (none unless one is `behind`): one per VIN of the first `AHEAD` the earlier
        attempts did not settle, as it would have asked them."""
        if not self.behind:
            return []
        settled = {vin for journal in self.journals for vin, _ in journal.final_answers()}
        spec = DATASETS[dataset]
        endpoint = ENDPOINTS[spec.endpoint]
        unsettled = [row for row in rows if row["vin"] not in settled][:AHEAD]
        return [CallIntent(next(CALL_IDS), spec.endpoint, endpoint.method, endpoint.path, row["vin"], 1,
                           estimate_units(spec.endpoint, spec.params(row["vin"], row)))
                for row in unsettled]

    def add_to(self, result: ChunkResult, unseen: Sequence[CallIntent] = ()) -> None:
        """Their calls and answers, and the `unseen` calls, in the chunk's figures (what they left pending, this
        attempt asked again)."""
        at = datetime.now(timezone.utc)
        for intent in unseen:
            record = CallRecord(endpoint=intent.endpoint, method=intent.method, path=intent.path, vin=intent.vin,
                                status=None, attempt=intent.attempt, latency_ms=0.0, units=intent.units,
                                error=NO_ANSWER, will_retry=False, call_id=intent.call_id, unknown=True)
            result.calls.append((intent.call_id, record, at, None))
        for journal in self.journals:
            earlier = journal.chunk_result()
            result.found.extend(earlier.found)
            result.no_data.extend(earlier.no_data)
            result.failed.extend(earlier.failed)
            result.calls.extend(earlier.calls)
