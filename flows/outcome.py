"""A finished run's exit code, from its summary (the table is tasks/exitcodes.py)."""

from __future__ import annotations

from typing import Any

from fleet_data.tasks.control.resources import CODES as BY_FAILURE  # a run halted for its resources or a service lost
from fleet_data.tasks.exitcodes import BUG, BY_STATUS, REFUSED

# Refusals of the key itself (401 unknown or inactive, 403 blocked or not entitled): running again changes
# nothing until someone fixes the key. A 402 or 429 clears with credits or a new month: that is partial.
KEY_REFUSALS = ("401", "403")


def exit_code(summary: dict[str, Any]) -> int:
    status = summary.get("status")
    if status == "failed":
        return BY_FAILURE.get(str(summary.get("failure")), BUG)
    if status == "partial" and _key_refused_everywhere(summary):
        return REFUSED
    return BY_STATUS.get(str(status), BUG)


def _key_refused_everywhere(summary: dict[str, Any]) -> bool:
    """Every dataset that had VINs to ask about was stopped by a 401/403 before any answer came back."""
    parts = [d for d in summary.get("datasets", {}).values() if d.get("planned")]
    plates = summary.get("plates") or {}
    if plates.get("lookups"):
        parts.append(plates)
    return bool(parts) and all(
        str(d.get("stop_reason") or "").startswith(KEY_REFUSALS)
        and not any(d.get(k) for k in ("found", "no_data", "not_found", "failed"))
        for d in parts
    )
