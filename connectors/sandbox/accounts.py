"""Who is calling and what they may spend: test keys, plans, quotas and prepaid credits.

Billing rules (units = quota units = prepaid credits in the sandbox):
- 1 unit per successful request; 400 validation errors and 404 not-found answers cost nothing;
- a request is checked against the quota/credits before it runs and rejected whole (429/402),
  spending nothing;
- related APIs share a quota (see API_GROUPS).
"""
from __future__ import annotations

import datetime as dt
import re
import threading
from dataclasses import dataclass, field, asdict

from . import errors

TEST_KEYS: dict[str, str] = {
    "<any other non-empty key>": "active standard plan, no quota limit, no ownership access",
    "test_enterprise": ("active enterprise plan: ownership (by VIN, phone, person, address and ZIP) allowed, "
                        "no quota limit"),
    "test_blocked": "403 'This API key has been blocked, please contact support if you believe this is an error.'",
    "test_inactive": "401 'User with this API key is not active.' followed by a billing instruction",
    "test_unknown": "401 'User with this API key was not found or the API key is disabled'",
    "test_basic_tier": ("basic plan: /history, /v1/lien-theft and /v2/marketvalue answer 403 "
                        "'This API is not available for your current subscription tier.' + upgrade "
                        "instruction; /v1/recalls-ymm answers 404 'This feature is not enabled for your account'"),
    "test_prepaid_<N>": ("prepaid account holding N credits; a request costing more than what is left answers "
                         "402 code=insufficient_credits with billingUrl and credits{available,cost,remaining,"
                         "shortfall}, spending nothing"),
    "test_quota_<N>": ("standard plan with a monthly quota of N units per API (shared by related APIs); "
                       "past it 429 with usage{current,limit,remaining}; a bulk request needing more units "
                       "than remain is rejected whole"),
    "test_recharge_<N>": ("prepaid account (1,000,000 credits) whose first N requests answer 503 "
                          "code=auto_recharge_pending, then succeed"),
}

# API name for quota and stats -> (display name, endpoints sharing it).
API_GROUPS: dict[str, str] = {
    "specs": "Specifications API",
    "international-vin-decoder": "International VIN Decoder API",
    "recalls": "Recalls API",
    "plate-decoder": "Plate Decoder API",
    "market-value": "Market Value API",
    "history": "Vehicle History API",
    "lien-theft": "Lien & Theft API",
    "ownership": "Ownership API",
    "ownership-phone": "Ownership by Phone API",
    "ymm-options": "Year Make Model Options API",
    "ymm": "Year Make Model API",
    "images": "Images API",
    "plate-recognition": "Plate Recognition API",
    "vin-ocr": "VIN OCR API",
    "obd": "OBD Codes API",
}

# Basic plan: which APIs answer 403 tier-gated, and which answer 404 feature-not-enabled.
BASIC_TIER_GATED = {"history", "lien-theft", "market-value-v2"}
BASIC_TIER_DISABLED_FEATURES = {"recalls-ymm"}


@dataclass
class Account:
    plan: str = "standard"            # standard | enterprise | basic
    status: str = "active"            # active | blocked | inactive | unknown
    ownership: bool = False           # may call the Ownership APIs
    monthly_quota: int | None = None  # units per API per month; None = unlimited
    prepaid_credits: int | None = None  # None = not prepaid
    auto_recharge_pending: int = 0    # this many next requests answer 503 auto_recharge_pending

    @classmethod
    def from_dict(cls, data: dict) -> "Account":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        if isinstance(known.get("auto_recharge_pending"), bool):
            known["auto_recharge_pending"] = int(known["auto_recharge_pending"])
        return cls(**known)

    def to_dict(self) -> dict:
        return asdict(self)


_NUMBERED = re.compile(r"^test_(prepaid|quota|recharge)_(\d+)$")


def account_for_test_key(key: str) -> Account:
    """The account a key stands for when nobody configured it explicitly."""
    fixed = {
        "test_enterprise": Account(plan="enterprise", ownership=True),
        "test_blocked": Account(status="blocked"),
        "test_inactive": Account(status="inactive"),
        "test_unknown": Account(status="unknown"),
        "test_basic_tier": Account(plan="basic"),
    }
    if key in fixed:
        return fixed[key]
    numbered = _NUMBERED.match(key)
    if numbered:
        kind, n = numbered.group(1), int(numbered.group(2))
        if kind == "prepaid":
            return Account(prepaid_credits=n)
        if kind == "quota":
            return Account(monthly_quota=n)
        return Account(prepaid_credits=1_000_000, auto_recharge_pending=n)
    return Account()


def billing_period(today: dt.date | None = None) -> str:
    today = today or dt.datetime.now(dt.timezone.utc).date()
    return f"{today:%Y-%m}"


@dataclass
class Ledger:
    """Accounts, quota usage and credit balances of one sandbox; safe across threads."""
    accounts: dict[str, Account] = field(default_factory=dict)
    usage: dict[tuple[str, str], int] = field(default_factory=dict)      # (key, api) -> units
    credits_spent: dict[str, int] = field(default_factory=dict)
    recharge_answered: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def account(self, key: str) -> Account:
        with self.lock:
            if key not in self.accounts:
                self.accounts[key] = account_for_test_key(key)
            return self.accounts[key]

    def add_account(self, key: str, account: Account) -> None:
        with self.lock:
            self.accounts[key] = account
            self.credits_spent.pop(key, None)
            self.recharge_answered.pop(key, None)

    def authenticate(self, key: str | None) -> Account:
        if not key:
            raise errors.ApiError(401, errors.MISSING_KEY)
        account = self.account(key)
        if account.status == "unknown":
            raise errors.ApiError(401, errors.UNKNOWN_KEY)
        if account.status == "inactive":
            raise errors.ApiError(401, errors.INACTIVE_KEY)
        if account.status == "blocked":
            raise errors.ApiError(403, errors.BLOCKED_KEY)
        return account

    def require(self, key: str, charges: dict[str, int], *, bulk: bool = False) -> None:
        """Reject (429/402/503) a request whose cost the account cannot cover; spends nothing."""
        account = self.account(key)
        with self.lock:
            if account.auto_recharge_pending > self.recharge_answered.get(key, 0):
                self.recharge_answered[key] = self.recharge_answered.get(key, 0) + 1
                raise errors.ApiError(503, errors.AUTO_RECHARGE_PENDING, code="auto_recharge_pending",
                                      retryable=True)
            if account.monthly_quota is not None:
                for api, units in charges.items():
                    self._check_quota(key, account, api, units, bulk)
            if account.prepaid_credits is not None:
                cost = sum(charges.values())
                available = account.prepaid_credits - self.credits_spent.get(key, 0)
                if cost > available:
                    raise errors.ApiError(
                        402,
                        f"Insufficient prepaid credits: this request costs {cost} credits "
                        f"and your balance holds {available}.",
                        code="insufficient_credits", billingUrl=errors.BILLING_URL,
                        credits={"available": available, "cost": cost, "remaining": available,
                                 "shortfall": cost - available})

    def _check_quota(self, key: str, account: Account, api: str, units: int, bulk: bool) -> None:
        limit = account.monthly_quota
        assert limit is not None  # only called for an account with a quota
        current = self.usage.get((key, api), 0)
        if current + units <= limit:
            return
        message = (f"You have exceeded the monthly quota of the {API_GROUPS.get(api, api)} "
                   f"for billing period {billing_period()} on the {account.plan} tier: "
                   f"current usage {current}, limit {limit}.")
        if bulk:
            message += f" This is a bulk request needing {units} units."
        raise errors.ApiError(429, message, usage={"current": current, "limit": limit,
                                                   "remaining": max(limit - current, 0)})

    def charge(self, key: str, charges: dict[str, int], *, bulk: bool = False) -> None:
        """Check then spend, atomically enough for a single event loop."""
        self.require(key, charges, bulk=bulk)
        with self.lock:
            for api, units in charges.items():
                if units:
                    self.usage[(key, api)] = self.usage.get((key, api), 0) + units
            account = self.accounts[key]
            if account.prepaid_credits is not None:
                self.credits_spent[key] = self.credits_spent.get(key, 0) + sum(charges.values())

    def units(self) -> list[dict]:
        with self.lock:
            return [{"key": k, "api": api, "units": n} for (k, api), n in sorted(self.usage.items())]

    def reset(self) -> None:
        with self.lock:
            self.usage.clear()
            self.credits_spent.clear()
            self.recharge_answered.clear()
