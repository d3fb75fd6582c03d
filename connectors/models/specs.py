"""Specifications (`/specs`) and international VIN decode results."""

from __future__ import annotations

from pydantic import Field

from .base import EchoedInput, Integer, Result, ServiceModel, Text


class SpecsAttributes(ServiceModel):
    year: Integer = None
    make: Text = None
    model: Text = None
    trim: Text = None
    style: Text = None
    type: Text = None
    made_in: Text = None
    doors: Integer = None
    fuel_type: Text = None
    engine: Text = None
    engine_cylinders: Integer = None
    transmission: Text = None
    drivetrain: Text = None
    # Present only in international-decode answers (the `/specs` fallback).
    vin: Text = None
    vid: Text = None


class Color(ServiceModel):
    category: Text = None
    name: Text = None


class Warranty(ServiceModel):
    type: Text = None
    miles: Integer = None  # "Unlimited" and blanks become None
    months: Integer = None


class SpecsResult(Result):
    input: EchoedInput = Field(default_factory=dict)
    attributes: SpecsAttributes = Field(default_factory=SpecsAttributes)
    colors: list[Color] = Field(default_factory=list)
    equipment: dict[str, Text] = Field(default_factory=dict)
    warranties: list[Warranty] = Field(default_factory=list)

    @property
    def is_international(self) -> bool:
        """True when `/specs` fell back to the international decoder (its answer has a `vid`)."""
        return self.attributes.vid is not None


class InternationalDecodeResult(Result):
    input: EchoedInput = Field(default_factory=dict)
    attributes: SpecsAttributes = Field(default_factory=SpecsAttributes)
