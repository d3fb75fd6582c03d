"""Counts and outcomes as log text: `key=value` pairs, not Python reprs.

Prefect shows task logs in its UI and, under `fleet serve` or a worker, on the terminal: a line reads
`ingested rows_in=5 valid=4 rejected=1 files=1`, never `{'rows_in': 5, ...}` or `RecallOutcome(...)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


def fields(values: Mapping[str, Any] | Any) -> str:
    """`key=value` for each set value of a mapping or dataclass, in order; None values are left out."""
    if dataclasses.is_dataclass(values) and not isinstance(values, type):
        values = dataclasses.asdict(values)
    return " ".join(f"{key}={_text(value)}" for key, value in dict(values).items() if value is not None)  # type: ignore[arg-type]


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple, set)):
        return ",".join(_text(v) for v in value)
    text = str(value)
    return text if text and not any(c.isspace() for c in text) else repr(text).replace("'", '"')
