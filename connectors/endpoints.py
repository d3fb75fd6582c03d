"""Every endpoint of the service in one table: name, method, path, result model, quota group.

Paths the spec does not show come from the vendor's own SDKs (PyPI `carsxe`, npm `carsxe-api`,
1.4.0) where they show them: batch status and download, plate recognition, VIN OCR, OBD codes,
year/make/model, ownership by person, address and ZIP. Ownership by phone and its bulk form are
our design. All recorded in the README ("Where the spec is silent"); change them here.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import models as m


@dataclass(frozen=True)
class Endpoint:
    name: str  # the user's word, used by `fleet lookup` and in `api_calls`
    method: str
    path: str
    model: type[m.Result] | None  # None: the body is not JSON (CSV download)
    api: str  # the quota/billing group the service counts it under
    summary: str


_ALL = (
    Endpoint("specs", "GET", "/specs", m.SpecsResult, "specs", "Decode a VIN into specifications"),
    Endpoint("international-vin", "GET", "/v1/international-vin-decoder", m.InternationalDecodeResult, "international", "Decode a non-US VIN"),
    Endpoint("market-value", "GET", "/v2/marketvalue", m.MarketValue, "market_value", "Market value by VIN (v2)"),
    Endpoint("market-value-v1", "GET", "/marketvalue", m.MarketValueV1, "market_value", "Market value by VIN (v1, legacy)"),
    Endpoint("history", "GET", "/history", m.HistoryReport, "history", "Vehicle history report"),
    Endpoint("lien-theft", "GET", "/v1/lien-theft", m.LienTheftResult, "lien_theft", "Lien and theft records (US)"),
    Endpoint("recalls", "GET", "/v1/recalls", m.RecallReport, "recalls", "Open recalls by VIN"),
    Endpoint("recalls-ymm", "GET", "/v1/recalls-ymm", m.RecallsByModel, "recalls", "Recalls by year/make/model"),
    Endpoint("recalls-batch-submit", "POST", "/v1/recalls-batch/submit", m.BatchSubmitted, "recalls", "Submit a recalls batch (≤10,000 VINs)"),
    Endpoint("recalls-batch-status", "GET", "/v1/recalls-batch/status", m.BatchStatusResult, "recalls", "Status of a recalls batch"),
    Endpoint("recalls-batch-results", "GET", "/v1/recalls-batch/results", m.BatchResults, "recalls", "Results of a finished recalls batch"),
    Endpoint("recalls-batch-download", "GET", "/v1/recalls-batch/download", None, "recalls", "Results of a finished batch as CSV"),
    Endpoint("plate", "GET", "/v2/platedecoder", m.PlateDecode, "plate", "Decode a license plate (60+ countries)"),
    Endpoint("us-plate", "GET", "/v1/us-platedecoder", m.USPlateDecode, "plate", "Decode a US license plate"),
    Endpoint("plate-v1", "GET", "/platedecoder", m.LegacyPlateDecode, "plate", "Decode a license plate (v1, legacy)"),
    Endpoint("ownership", "GET", "/v1/ownership/vin", m.OwnershipResult, "ownership", "Registered owners by VIN (enterprise)"),
    Endpoint("ownership-phone", "GET", "/v1/ownership/phone", m.PhoneOwnership, "ownership", "Registered owners by phone number"),
    Endpoint("ownership-phones", "POST", "/v1/ownership/phone/bulk", m.PhoneOwnershipBulk, "ownership", "Owners for up to 100 phone numbers"),
    Endpoint("ownership-person", "GET", "/v1/ownership/person", m.OwnershipSearch, "ownership", "A person's vehicles by name and address (enterprise)"),
    Endpoint("ownership-address", "GET", "/v1/ownership/address", m.OwnershipSearch, "ownership", "Residents at a street address (enterprise)"),
    Endpoint("ownership-zip", "GET", "/v1/ownership/zip", m.OwnershipZip, "ownership", "People in a ZIP code, filtered and paged (enterprise)"),
    Endpoint("ymm-options", "GET", "/v1/ymm-options", m.YmmOptions, "ymm_options", "Year/make/model/trim option lists"),
    Endpoint("year-make-model", "GET", "/v1/ymm", m.YearMakeModel, "ymm", "One vehicle by year, make, model (and trim)"),
    Endpoint("images", "GET", "/images", m.ImageResult, "images", "Vehicle images by make/model"),
    Endpoint("plate-recognition", "POST", "/platerecognition", m.PlateRecognition, "plate_recognition", "Read plates from an image"),
    Endpoint("vin-ocr", "POST", "/v1/vinocr", m.VinRecognition, "vin_ocr", "Read a VIN from an image"),
    Endpoint("obd", "GET", "/obdcodesdecoder", m.ObdCode, "obd", "Decode an OBD-II trouble code"),
)

ENDPOINTS: dict[str, Endpoint] = {e.name: e for e in _ALL}
