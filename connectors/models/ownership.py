"""Registered-owner lookups (enterprise plans)."""

from __future__ import annotations

from pydantic import Field

from typing import Any

from .base import EchoedInput, Integer, Result, ServiceModel, Text, Timestamp


class Address(ServiceModel):
    street: Text = None
    city: Text = None
    state: Text = None
    zip: Text = None


class Demographics(ServiceModel):
    marital_status: Text = None
    home_owner: Text = None
    children_in_household: Text = None
    veteran_in_household: Text = None
    occupation: Text = None
    income_range: Text = None
    net_worth_range: Text = None
    credit_range: Text = None


class Email(ServiceModel):
    address: Text = None
    last_seen: Timestamp = None


class Phone(ServiceModel):
    number: Text = None
    type: Text = None
    dnc: bool | None = None


class OwnedVehicle(ServiceModel):
    make: Text = None
    model: Text = None
    year: Integer = None
    vin: Text = None


class Owner(ServiceModel):
    record_id: Text = None
    first_name: Text = None
    last_name: Text = None
    age: Text = None
    gender: Text = None
    address: Address | None = None
    demographics: Demographics | None = None
    emails: list[Email] = Field(default_factory=list)
    phones: list[Phone] = Field(default_factory=list)
    vehicle_history: list[OwnedVehicle] = Field(default_factory=list)


class OwnershipVehicle(ServiceModel):
    make: Text = None
    model: Text = None
    manufacturer: Text = None
    fuel_type: Text = None
    drive_type: Text = None
    transmission_type: Text = None
    body_type: Text = None
    body_subtype: Text = None
    vehicle_class: Text = None
    size: Text = None
    vehicle_type: Text = None
    year: Integer = None
    doors: Integer = None
    engine_cylinders: Integer = None


class OwnershipResult(Result):
    """`/v1/ownership/vin`."""

    vin: Text = None
    vehicle: OwnershipVehicle | None = None
    owners: list[Owner] = Field(default_factory=list)
    error: Text = None


class PhoneOwnership(Result):
    """`/v1/ownership/phone` (designed: the spec does not show it)."""

    phone: Text = None
    owners: list[Owner] = Field(default_factory=list)
    count: Integer = None


class PhoneMatch(ServiceModel):
    phone: Text = None
    owners: list[Owner] = Field(default_factory=list)


class PhoneOwnershipBulk(Result):
    """`/v1/ownership/phone/bulk` (designed): numbers with no hit are omitted."""

    matches: list[PhoneMatch] = Field(default_factory=list)
    count: Integer = None


class OwnershipSearch(Result):
    """`/v1/ownership/person` and `/v1/ownership/address`: billed per match."""

    input: EchoedInput = Field(default_factory=dict)
    count: Integer = None
    matches: list[Owner] = Field(default_factory=list)
    error: Text = None


class OwnershipZip(Result):
    """`/v1/ownership/zip`: one page of the people in a ZIP; billed per record."""

    zip: Text = None
    filters: dict[str, Any] = Field(default_factory=dict)
    page: Integer = None
    limit: Integer = None
    count: Integer = None
    total: Integer = None
    records: list[Owner] = Field(default_factory=list)
    error: Text = None
