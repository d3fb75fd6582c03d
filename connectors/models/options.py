"""Year/make/model options and lookup, images, and the image/OBD products.

The spec shows neither the paths nor the answers of the last three; their shapes follow the
vendor's own clients (SDKs and MCP server types). Unknown fields are kept, as everywhere.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import EchoedInput, Integer, Number, Result, ServiceModel, Text

LAYERS = ("years", "makes", "models", "trims", "variants")


class YmmOptions(Result):
    """`/v1/ymm-options`: exactly one of the layer arrays is present."""

    input: EchoedInput = Field(default_factory=dict)
    years: list[Text] | None = None
    makes: list[Text] | None = None
    models: list[Text] | None = None
    trims: list[Text] | None = None
    variants: list[Text] | None = None
    modelCount: Integer = None

    @property
    def layer(self) -> str | None:
        return next((name for name in LAYERS if getattr(self, name) is not None), None)

    @property
    def values(self) -> list[str]:
        return [v for v in (getattr(self, self.layer) or []) if v is not None] if self.layer else []


class Image(ServiceModel):
    mime: Text = None
    link: Text = None
    contextLink: Text = None
    thumbnailLink: Text = None
    accentColor: Text = None
    height: Integer = None
    width: Integer = None
    byteSize: Integer = None


class ImageResult(Result):
    """`/images`."""

    images: list[Image] = Field(default_factory=list)
    query: dict[str, Any] = Field(default_factory=dict)


class Box(ServiceModel):
    xmin: Integer = None
    ymin: Integer = None
    xmax: Integer = None
    ymax: Integer = None


class PlateCandidate(ServiceModel):
    plate: Text = None
    score: Number = None


class RecognizedPlate(ServiceModel):
    plate: Text = None
    score: Number = None
    box: Box | None = None
    candidates: list[PlateCandidate] = Field(default_factory=list)
    region: dict[str, Any] | None = None
    vehicle: dict[str, Any] | None = None


class PlateRecognition(Result):
    """`POST /platerecognition`: the plates read from an image."""

    results: list[RecognizedPlate] = Field(default_factory=list)
    filename: Text = None
    processing_time: Number = None


class VinCandidate(ServiceModel):
    vin: Text = None
    confidence: Number = None
    box: Box | None = None


class VinRecognition(Result):
    """`POST /v1/vinocr`: the best VIN read from an image, and the other candidates."""

    vin: Text = None
    confidence: Number = None
    box: Box | None = None
    candidates: list[VinCandidate] = Field(default_factory=list)


class ObdCode(Result):
    """`GET /obdcodesdecoder`: what a diagnostic trouble code means."""

    code: Text = None
    diagnosis: Text = None
    date: Text = None


class YmmMatch(ServiceModel):
    make: Text = None
    model: Text = None
    year: Integer = None
    trim: Text = None
    name: Text = None
    base_msrp: Number = None
    base_invoice: Number = None
    total_seating: Integer = None
    color: dict[str, Any] = Field(default_factory=dict)
    features: dict[str, Any] = Field(default_factory=dict)
    is_truck: bool | None = None
    is_electric: bool | None = None
    is_plugin_electric: bool | None = None


class YearMakeModel(Result):
    """`GET /v1/ymm`: the best-matching trim of a year, make and model, and every trim."""

    input: EchoedInput = Field(default_factory=dict)
    bestMatch: YmmMatch | None = None
    trimOptions: list[dict[str, Any]] = Field(default_factory=list)
