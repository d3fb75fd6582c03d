"""Typed results of the Vehicle Data Service, one module per resource."""

from .base import Result, ServiceModel
from .history import HistoryReport, LienTheftEvent, LienTheftResult
from .market_value import GROUP_NAMES, MarketValue, MarketValueV1, ValuationGroup
from .options import Image, ImageResult, ObdCode, PlateRecognition, VinRecognition, YearMakeModel, YmmOptions
from .ownership import Owner, OwnershipResult, OwnershipSearch, OwnershipZip, PhoneOwnership, PhoneOwnershipBulk
from .plates import LegacyPlateDecode, PlateDecode, PlateFanOut, USPlateDecode
from .recalls import (
    BatchJob,
    BatchResultItem,
    BatchResults,
    BatchResultsHead,
    BatchStatus,
    BatchStatusResult,
    BatchSubmitted,
    Recall,
    RecallReport,
    RecallsByModel,
    parse_batch_csv,
)
from .specs import InternationalDecodeResult, SpecsResult

__all__ = [
    "BatchJob", "BatchResultItem", "BatchResults", "BatchResultsHead", "BatchStatus", "BatchStatusResult",
    "BatchSubmitted", "GROUP_NAMES", "HistoryReport", "Image", "ImageResult",
    "InternationalDecodeResult", "LegacyPlateDecode", "LienTheftEvent", "LienTheftResult",
    "MarketValue", "MarketValueV1", "ObdCode", "Owner", "OwnershipResult", "OwnershipSearch",
    "OwnershipZip", "PhoneOwnership", "PhoneOwnershipBulk", "PlateDecode", "PlateFanOut",
    "PlateRecognition", "Recall", "RecallReport", "RecallsByModel", "Result", "ServiceModel",
    "SpecsResult", "USPlateDecode", "ValuationGroup", "VinRecognition", "YearMakeModel",
    "YmmOptions", "parse_batch_csv",
]
