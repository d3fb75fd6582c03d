"""Shared pieces of the result models: the base class and edge parsers.

The service sends many numbers as strings ("25400", "Unlimited", ""). They are
parsed here, once, so nothing downstream re-parses text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime
from typing import Annotated, Any, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, PrivateAttr, ValidationError

from ..errors import MalformedResponseError
from ..redact import REDACTED

_NUMBER_JUNK = re.compile(r"[,$\s]")


def _to_float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = _NUMBER_JUNK.sub("", str(value))
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _to_int(value: Any) -> int | None:
    number = _to_float(value)
    return int(number) if number is not None and number.is_integer() else None


def _to_dmy_date(value: Any) -> date | None:
    """`report_received_date` is day/month/year (`25/03/2021`), not the US order."""
    if value is None or isinstance(value, date):
        return value
    text = str(value).strip()
    if not text:
        return None
    for fmt in ("%d/%m/%Y", "%Y-%m-%d"):
        try:
            return datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    return None


def _to_datetime(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    text = str(value).strip()
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _to_text(value: Any) -> str | None:
    """Scalars the spec calls strings sometimes arrive as numbers; keep them as text."""
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


Number = Annotated[float | None, BeforeValidator(_to_float)]
Integer = Annotated[int | None, BeforeValidator(_to_int)]
DMYDate = Annotated[date | None, BeforeValidator(_to_dmy_date)]
Timestamp = Annotated[datetime | None, BeforeValidator(_to_datetime)]
Text = Annotated[str | None, BeforeValidator(_to_text)]


class ServiceModel(BaseModel):
    """Base of every result: unknown fields are kept (responses gain fields within a version)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=False)


class Result(ServiceModel):
    """A whole response body. Carries the redacted JSON it was parsed from."""

    success: bool = True
    timestamp: Timestamp = None
    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def raw(self) -> dict[str, Any]:
        """The redacted response body, as received (for storage and re-parsing)."""
        return self._raw

    @classmethod
    def from_payload(cls, payload: dict[str, Any], endpoint: str | None = None) -> Self:
        """The typed result; valid JSON of the wrong shape is a `MalformedResponseError`, like garbled JSON.

        So every caller handles one error tree: a wrong-shape answer fails its own call, never a
        whole chunk or batch with a pydantic traceback.
        """
        try:
            result = cls.model_validate(payload)
        except ValidationError as exc:
            raise _mismatch(exc, endpoint) from None
        result._raw = payload
        return result


def _mismatch(exc: ValidationError, endpoint: str | None) -> MalformedResponseError:
    """The first mismatch, by location only (never the values: they may be personal data)."""
    first: Mapping[str, Any] = exc.errors()[0] if exc.error_count() else {}
    where = ".".join(str(part) for part in first.get("loc", ())) or "body"
    return MalformedResponseError(
        f"{endpoint or 'the service'} answered 200 with a body that does not match its schema "
        f"({where}: {first.get('msg', 'invalid')})",
        endpoint=endpoint, status=200,
    )


def strip_key(value: Any) -> Any:
    """Belt and braces: an echoed `input.key` never survives into a model."""
    if isinstance(value, dict) and "key" in value:
        return {k: (REDACTED if k == "key" else v) for k, v in value.items()}
    return value


EchoedInput = Annotated[dict[str, Any], BeforeValidator(strip_key)]
