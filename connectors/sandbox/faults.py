"""Switchable faults and latency, drawn from a seeded generator so a failing run can be replayed.

Each counted API request takes exactly three draws from `random.Random(seed)` in arrival
order: which fault (if any), which status, and the latency. The same seed and the same
request sequence therefore give the same faults, whatever the knobs are set to.
"""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field, asdict


@dataclass
class FaultConfig:
    rate: float = 0.0                      # fraction of calls answering one of `statuses`
    statuses: list[int] = field(default_factory=lambda: [500, 502, 503, 504])
    timeout_rate: float = 0.0              # calls that hang for `timeout_seconds`, then answer 504
    timeout_seconds: float = 30.0
    drop_rate: float = 0.0                 # calls whose connection is closed without an answer
    malformed_rate: float = 0.0            # calls answering 200 with a truncated JSON body
    slow_rate: float = 0.0                 # calls delayed by `slow_ms` before being served normally
    slow_ms: float = 0.0
    latency_ms: float | tuple[float, float] | None = None  # every call: mean (uniform 0.5x..1.5x) or (min, max)
    omit_retry_after: bool = False         # retryable answers lose their Retry-After header
    retry_after_seconds: int = 60
    batch_fail_rate: float = 0.0           # fraction of submitted recall batches ending `failed`
    endpoints: list[str] = field(default_factory=list)  # faults fall only on these paths (empty: on every path)
    max_faults: int | None = None          # at most this many faulted calls, then none (None: no limit)
    seed: int = 0

    @classmethod
    def from_dict(cls, data: dict) -> "FaultConfig":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        if isinstance(known.get("latency_ms"), list):
            known["latency_ms"] = tuple(known["latency_ms"])
        return cls(**known)

    def to_dict(self) -> dict:
        data = asdict(self)
        if isinstance(self.latency_ms, tuple):
            data["latency_ms"] = list(self.latency_ms)
        return data


@dataclass(frozen=True)
class Draw:
    kind: str | None   # None | "status" | "timeout" | "drop" | "malformed" | "slow"
    status: int
    latency_s: float


class FaultInjector:
    def __init__(self, config: FaultConfig):
        self._lock = threading.Lock()
        self.configure(config)

    def configure(self, config: FaultConfig) -> None:
        with self._lock:
            self.config = config
            self._rng = random.Random(config.seed)
            self._faulted = 0  # calls faulted since configured (for `max_faults`)

    def draw(self, endpoint: str | None = None) -> Draw:
        """The fault for a call to `endpoint` (a path); `endpoints` and `max_faults` only spare calls, the
        three draws are taken either way, so the sequence of the others is unchanged."""
        with self._lock:
            c = self.config
            which, pick, lat = self._rng.random(), self._rng.random(), self._rng.random()
            kind = None
            edge = 0.0
            for name, share in (("status", c.rate), ("timeout", c.timeout_rate), ("drop", c.drop_rate),
                                ("malformed", c.malformed_rate), ("slow", c.slow_rate)):
                edge += share
                if which < edge:
                    kind = name
                    break
            if kind is not None and c.endpoints and endpoint not in c.endpoints:
                kind = None
            if kind is not None and c.max_faults is not None:
                if self._faulted >= c.max_faults:
                    kind = None
                else:
                    self._faulted += 1
        statuses = c.statuses or [500]
        status = statuses[min(int(pick * len(statuses)), len(statuses) - 1)]
        return Draw(kind, status, _latency_seconds(c.latency_ms, lat))

    def draw_batch_failure(self) -> bool:
        with self._lock:
            if self.config.batch_fail_rate <= 0:
                return False  # no draw, so batches do not shift the fault sequence of calls
            return self._rng.random() < self.config.batch_fail_rate


def _latency_seconds(latency_ms, u: float) -> float:
    if not latency_ms:
        return 0.0
    if isinstance(latency_ms, (tuple, list)):
        low, high = latency_ms
    else:
        low, high = 0.5 * latency_ms, 1.5 * latency_ms
    return (low + (high - low) * u) / 1000.0


def parse_latency(text: str) -> float | tuple[float, float]:
    """CLI form: `50` (mean) or `20-80` (uniform range)."""
    if "-" in text:
        low, high = text.split("-", 1)
        return float(low), float(high)
    return float(text)
