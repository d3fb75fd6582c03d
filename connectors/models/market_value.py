"""Market value results, both generations."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from .base import EchoedInput, Integer, Number, Result, ServiceModel, Text, Timestamp

KINDS = ("whole", "retail", "trade_in")
TIERS = ("xclean", "clean", "avg", "rough")
GROUP_NAMES = tuple(f"{k}_{t}" for k in KINDS for t in TIERS if not (k == "trade_in" and t == "xclean"))
CONDITION_TIER = {"excellent": "xclean", "clean": "clean", "average": "avg", "rough": "rough"}


class ValuationGroup(ServiceModel):
    """One `<kind>_<tier>` group, its `base_<kind>_<tier>`... fields without the suffix."""

    kind: str
    tier: str
    base: Number = None
    mileage: Number = None
    add_deduct: Number = None
    regional: Number = None
    adjusted: Number = None


def _normalise_group(name: str, raw: Any) -> Any:
    if not isinstance(raw, dict):
        return raw
    kind, tier = name.rsplit("_", 1)
    out: dict[str, Any] = {"kind": kind, "tier": tier}
    for part in ("base", "mileage", "add_deduct", "regional", "adjusted"):
        out[part] = raw.get(f"{part}_{name}", raw.get(part))
    return out


class AddDeduct(ServiceModel):
    uoc: Text = None
    name: Text = None
    xclean: Number = None
    clean: Number = None
    avg: Number = None
    rough: Number = None
    auto: Text = None


class MileageBand(ServiceModel):
    model_year: Text = None
    range_begin: Integer = None
    range_end: Integer = None
    xclean: Number = None
    clean: Number = None
    avg: Number = None
    rough: Number = None
    finadv: Number = None
    mileage_cat: Text = None


class AuctionValues(ServiceModel):
    low_auction_value: Number = None
    average_auction_value: Number = None
    high_auction_value: Number = None
    date_range: Text = None


class MarketValue(Result):
    """`/v2/marketvalue`. Groups are exposed both by name and as `groups`."""

    input: EchoedInput = Field(default_factory=dict)
    uid: Text = None
    publish_date: Text = None
    data_freq: Text = None
    state: Text = None
    country: Text = None
    uvc: Text = None
    model_year: Integer = None
    make: Text = None
    model: Text = None
    series: Text = None
    style: Text = None
    mileage_cat: Text = None
    class_name: Text = None
    fuel_type: Text = None
    drivetrain: Text = None
    first_values_flag: bool | None = None
    msrp: Number = None
    retail: Number = None
    trade_in: Number = None
    rough_trade_in: Number = None
    average_trade_in: Number = None
    loan_value: Number = None
    region2: Number = None
    region3: Number = None
    region4: Number = None
    region5: Number = None
    region6: Number = None
    retail_equipped: Number = None
    wheel_base: Number = None
    taxable_hp: Number = None
    whole_xclean: ValuationGroup | None = None
    whole_clean: ValuationGroup | None = None
    whole_avg: ValuationGroup | None = None
    whole_rough: ValuationGroup | None = None
    retail_xclean: ValuationGroup | None = None
    retail_clean: ValuationGroup | None = None
    retail_avg: ValuationGroup | None = None
    retail_rough: ValuationGroup | None = None
    trade_in_clean: ValuationGroup | None = None
    trade_in_avg: ValuationGroup | None = None
    trade_in_rough: ValuationGroup | None = None
    add_deduct_list: list[AddDeduct] = Field(default_factory=list)
    mileage_list: list[MileageBand] = Field(default_factory=list)
    model_number_list: list[Text] = Field(default_factory=list)
    trade_in_values: list[Any] = Field(default_factory=list)
    auction_values: AuctionValues | None = None

    @model_validator(mode="before")
    @classmethod
    def _groups(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {k: (_normalise_group(k, v) if k in GROUP_NAMES else v) for k, v in data.items()}
        return data

    @property
    def groups(self) -> list[ValuationGroup]:
        return [g for name in GROUP_NAMES if (g := getattr(self, name)) is not None]

    def group(self, kind: str, condition_or_tier: str) -> ValuationGroup | None:
        """The group for a kind and a condition (`excellent`...) or tier (`xclean`...)."""
        tier = CONDITION_TIER.get(condition_or_tier, condition_or_tier)
        return getattr(self, f"{kind}_{tier}", None)


class TradeInValue(ServiceModel):
    date: Timestamp = None
    value: Number = None


class AuctionValuesV1(ServiceModel):
    lowAuctionValue: Number = None
    averageAuctionValue: Number = None
    highAuctionValue: Number = None
    dateRange: Text = None


class MarketValueV1(Result):
    """`/marketvalue` (v1): single figures, sent as strings, parsed here."""

    input: EchoedInput = Field(default_factory=dict)
    retail: Number = None
    tradeIn: Number = None
    roughTradeIn: Number = None
    averageTradeIn: Number = None
    loanValue: Number = None
    msrp: Number = None
    uid: Integer = None
    tradeInValues: list[TradeInValue] = Field(default_factory=list)
    auctionValues: AuctionValuesV1 | None = None


