"""What a fetch of one chunk produced: answers, failures, pending VINs and every call, as the journal rebuilds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleet_data.connectors.calls import CallRecord


@dataclass
class ChunkResult:
    dataset: str
    found: list[tuple[str, Any, datetime]] = field(default_factory=list)
    no_data: list[tuple[str, datetime]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    calls: list[tuple[str, CallRecord, datetime, str | None]] = field(default_factory=list)
    requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    stop_reason: str | None = None
    handed_off: list[str] = field(default_factory=list)  # VINs left waiting for a retry to the next chunk

    @property
    def units(self) -> int:
        """What the service billed, by its answers."""
        return sum(c.units for _, c, _, _ in self.calls if not c.unknown)

    @property
    def possible_units(self) -> int:
        """What calls never answered (timed out, dropped) may have cost besides: the service may have billed them."""
        return sum(c.units for _, c, _, _ in self.calls if c.unknown)
