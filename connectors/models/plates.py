"""License plate decoders: v2 multi-country, US-only, and the legacy v1 route."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import EchoedInput, Integer, Result, ServiceModel, Text
from .specs import SpecsResult


class PlateDecode(Result):
    """`/v2/platedecoder` single-object form; the field set varies by country."""

    input: EchoedInput = Field(default_factory=dict)
    description: Text = None
    make: Text = None
    model: Text = None
    trim: Text = None
    vin: Text = None
    style: Text = None
    year: Text = None
    assembly: Text = None
    fuel_type: Text = None
    color: Text = None
    body_style: Text = None
    engine_size: Text = None
    drive_type: Text = None
    transmission: Text = None


class PlateFanOut(Result):
    """`/v2/platedecoder` with country=US and no state: every jurisdiction searched."""

    results: list[dict[str, Any]] = Field(default_factory=list)  # item fields: not shown in the spec
    count: Integer = None
    billed_credits: Integer = None


class USPlateDecode(Result):
    """`/v1/us-platedecoder`."""

    input: EchoedInput = Field(default_factory=dict)
    vin: Text = None
    year: Text = None
    make: Text = None
    model: Text = None
    trim: Text = None
    description: Text = None
    engine_size: Text = None
    body_style: Text = None
    transmission: Text = None
    drive_type: Text = None
    fuel_type: Text = None
    color: Text = None
    vehicle_specs: SpecsResult | None = None


class LegacyPlateDecode(Result):
    """`/platedecoder` (v1): flat, capitalised fields."""

    Description: Text = None
    CarMake: Text = None
    CarModel: Text = None
    RegistrationYear: Text = None
    VIN: Text = None
