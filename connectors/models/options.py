"""Year/make/model options, images, and the image/OBD products."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import EchoedInput, Integer, Result, ServiceModel, Text

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


class RecognitionResult(Result):
    """Plate recognition, VIN OCR and OBD decoding: paths and shapes are not shown in the spec."""
