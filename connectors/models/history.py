"""History report and lien/theft records."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import EchoedInput, Integer, Result, ServiceModel, Text


class HistoryReport(Result):
    """`/history`. Element fields of the five arrays are not shown in the spec: kept as dicts."""

    vin: Text = None
    junkAndSalvageInformation: list[dict[str, Any]] = Field(default_factory=list)
    insuranceInformation: list[dict[str, Any]] = Field(default_factory=list)
    brandsInformation: list[dict[str, Any]] = Field(default_factory=list)
    currentTitleInformation: list[dict[str, Any]] = Field(default_factory=list)
    historyInformation: list[dict[str, Any]] = Field(default_factory=list)
    brandsRecordCount: Integer = None
    vinChanged: bool | None = None


class LienTheftEvent(ServiceModel):
    event: Text = None
    location: Text = None
    details_list: list[Text] = Field(default_factory=list)


class LienTheftResult(Result):
    """`/v1/lien-theft`."""

    input: EchoedInput = Field(default_factory=dict)
    year: Integer = None
    make: Text = None
    model: Text = None
    type: Text = None
    events: list[LienTheftEvent] = Field(default_factory=list)
