"""License plate decoders: v2 multi-country, US-only, and the legacy v1 route."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import EchoedInput, Integer, Result, Text
from .specs import SpecsResult


class _PlateVehicle(Result):
    """The vehicle fields both plate decoders share."""

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


class PlateDecode(_PlateVehicle):
    """`/v2/platedecoder` single-object form; the field set varies by country."""

    style: Text = None
    assembly: Text = None


class PlateFanOut(Result):
    """`/v2/platedecoder` with country=US and no state: every jurisdiction searched."""

    results: list[dict[str, Any]] = Field(default_factory=list)  # item fields: not shown in the spec
    count: Integer = None
    billed_credits: Integer = None


class USPlateDecode(_PlateVehicle):
    """`/v1/us-platedecoder`."""

    vehicle_specs: SpecsResult | None = None


class LegacyPlateDecode(Result):
    """`/platedecoder` (v1): flat, capitalised fields."""

    Description: Text = None
    CarMake: Text = None
    CarModel: Text = None
    RegistrationYear: Text = None
    VIN: Text = None
