"""The spec's billing rules: how many units a call costs, before and after.

`estimate_units` is what the planner uses to price a run before calling;
`units_for_answer` is what a successful answer actually cost (some endpoints
bill per hit or per owner, which only the answer tells).
"""

from __future__ import annotations

from collections.abc import Mapping  # not typing's: an isinstance check per answer costs a third less
from typing import Any


def estimate_units(endpoint: str, params: Mapping[str, Any] | None = None, *, vins: int = 0) -> int:
    """Units one call is expected to cost when it succeeds."""
    params = params or {}
    if endpoint == "recalls-batch-submit":
        return vins
    if endpoint == "us-plate":
        return 5 + (1 if _truthy(params.get("decodeVIN")) else 0)
    if endpoint == "plate":
        if _truthy(params.get("require_vin")) and str(params.get("country", "")).upper() == "ES":
            return 2
        return 1
    if endpoint in ("ownership", "ownership-phone", "ownership-phones", "ownership-person", "ownership-address"):
        return 1  # per owner returned; one is the usual expectation
    if endpoint == "ownership-zip":
        return int(params.get("limit") or 15)  # per record: a full page
    if endpoint in ("recalls-batch-status", "recalls-batch-results", "recalls-batch-download"):
        return 0  # follow-ups of a paid batch
    return 1


def units_for_answer(endpoint: str, params: Mapping[str, Any], status: int, body: Any) -> int:
    """Units a finished call cost: nothing for an error, rule-based for a success."""
    if status not in (200, 202):
        return 0
    body = body if isinstance(body, Mapping) else {}
    if endpoint == "recalls-batch-submit":
        data = body.get("data") or {}
        return int(data.get("totalVins") or 0)
    if endpoint == "us-plate":
        return 5 + (1 if _truthy(params.get("decodeVIN")) and body.get("vehicle_specs") else 0)
    if endpoint == "plate" and "results" in body:  # US fan-out: one credit per hit
        return int(body.get("billed_credits") or body.get("count") or len(body.get("results") or []))
    if endpoint == "ymm-options" and body.get("modelCount") is not None:
        return int(body["modelCount"])
    if endpoint == "ownership":
        return len(body.get("owners") or [])
    if endpoint == "ownership-phone":
        return len(body.get("owners") or [])
    if endpoint in ("ownership-person", "ownership-address"):
        return len(body.get("matches") or [])
    if endpoint == "ownership-zip":
        return len(body.get("records") or [])
    if endpoint == "ownership-phones":
        return sum(len(mt.get("owners") or []) for mt in body.get("matches") or [])
    return estimate_units(endpoint, params)


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("1", "true", "yes") if value is not None else False
