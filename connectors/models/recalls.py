"""Recalls by VIN, by year/make/model, and the recalls batch job."""

from __future__ import annotations

import csv
import io
from enum import Enum
from typing import Any

from pydantic import Field, field_validator, model_validator

from .base import DMYDate, EchoedInput, Integer, Result, ServiceModel, Text, Timestamp


class Recall(ServiceModel):
    nhtsa_campaign_number: Text = None
    manufacturer: Text = None
    park_it: bool | None = None
    park_outside: bool | None = None
    over_the_air_update: bool | None = None
    report_received_date: DMYDate = None
    component: Text = None
    summary: Text = None
    consequence: Text = None
    remedy: Text = None
    notes: Text = None


class RecallReportData(ServiceModel):
    uuid: Text = None
    vin: Text = None
    manufacturer: Text = None
    model_year: Integer = None
    # Beyond the four documented fields the spec says "not shown"; these are optional.
    make: Text = None
    model: Text = None
    recall_count: Integer = None
    has_recalls: bool | None = None
    recalls: list[Recall] = Field(default_factory=list)


class RecallReport(Result):
    """`/v1/recalls`: open recalls for one VIN."""

    input: EchoedInput = Field(default_factory=dict)
    data: RecallReportData = Field(default_factory=RecallReportData)


class RecallsByModelData(ServiceModel):
    make: Text = None
    model: Text = None
    model_year: Integer = None
    recall_count: Integer = None
    has_recalls: bool | None = None
    recalls: list[Recall] = Field(default_factory=list)


class RecallsByModel(Result):
    """`/v1/recalls-ymm`: every campaign for a year/make/model."""

    input: EchoedInput = Field(default_factory=dict)
    data: RecallsByModelData = Field(default_factory=RecallsByModelData)


class BatchStatus(str, Enum):
    UPLOADING = "uploading"
    PROCESSING = "processing"
    COMPLETED = "completed"
    PARTIAL = "partial"
    FAILED = "failed"
    UNKNOWN = "unknown"  # a status this client does not know yet: treated as still running

    @property
    def is_terminal(self) -> bool:
        return self in (BatchStatus.COMPLETED, BatchStatus.PARTIAL, BatchStatus.FAILED)

    @property
    def has_results(self) -> bool:
        return self in (BatchStatus.COMPLETED, BatchStatus.PARTIAL)


class BatchJob(ServiceModel):
    batchId: str
    numericBatchId: Integer = None
    status: BatchStatus = BatchStatus.UNKNOWN
    status_text: Text = None  # the status exactly as the service spelled it
    totalVins: Integer = None
    processedVins: Integer = None
    batchToken: str | None = Field(default=None, repr=False)
    createdAt: Timestamp = None
    completedAt: Timestamp = None

    @model_validator(mode="before")
    @classmethod
    def _keep_status_text(cls, data: object) -> object:
        if isinstance(data, dict) and "status" in data and "status_text" not in data:
            data = {**data, "status_text": data["status"]}
        return data

    @field_validator("status", mode="before")
    @classmethod
    def _known_status(cls, value: object) -> BatchStatus:
        try:
            return BatchStatus(str(value).lower())
        except ValueError:
            return BatchStatus.UNKNOWN

    @property
    def batch_id(self) -> str:
        return self.batchId


class BatchSubmitted(Result):
    """202 answer of `/v1/recalls-batch/submit`."""

    data: BatchJob
    message: Text = None


class BatchStatusResult(Result):
    data: BatchJob


class BatchResultItem(ServiceModel):
    vin: str
    hasRecalls: bool = False
    recallCount: int = 0


class BatchResultsData(ServiceModel):
    job: BatchJob
    results: list[BatchResultItem] = Field(default_factory=list)


class BatchResults(Result):
    data: BatchResultsData


class BatchResultsHeadData(ServiceModel):
    job: BatchJob
    results: list[Any] = Field(default_factory=list)  # a list, its items left as sent


class BatchResultsHead(Result):
    """`/v1/recalls-batch/results` read for its job alone: the items are left to whoever stores the answer (a
    pipeline shreds them in SQL, never a model per VIN)."""

    data: BatchResultsHeadData


def parse_batch_csv(text: str) -> list[BatchResultItem]:
    """The download endpoint's CSV (`vin,hasRecalls,recallCount`) as result items."""
    rows = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    return [
        BatchResultItem(
            vin=row["vin"],
            hasRecalls=str(row.get("hasRecalls", "")).strip().lower() in ("true", "1", "yes"),
            recallCount=int(row.get("recallCount") or 0),
        )
        for row in rows
        if row.get("vin")
    ]
