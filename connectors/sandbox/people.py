"""Who lives where: deterministic people for ownership by person, by address and by ZIP.

Every record has the owner shape of ownership by VIN (vehicles.owner), placed at the searched
address or ZIP. About a fifth of people and addresses have no record (404 `no_data`); a ZIP holds
20 to 99 people, paged.
"""
from __future__ import annotations

from functools import lru_cache

from .vehicles import digest, owner, synthetic_vin

NO_MATCH_PERCENT = 20
# First ZIP digit -> a plausible city and state for the synthetic address.
_LOCALITY = {"0": ("Boston", "MA"), "1": ("New York", "NY"), "2": ("Richmond", "VA"), "3": ("Tampa", "FL"),
             "4": ("Columbus", "OH"), "5": ("Minneapolis", "MN"), "6": ("Chicago", "IL"), "7": ("Austin", "TX"),
             "8": ("Denver", "CO"), "9": ("Los Angeles", "CA")}


def _resident(seed: str, index: int, zip5: str, *, street: str | None = None, first: str | None = None,
              last: str | None = None) -> dict:
    record = owner(seed, index, synthetic_vin(f"{seed}:{index}"))
    city, state = _LOCALITY[zip5[0]]
    record["address"] = {"street": street or record["address"]["street"], "city": city, "state": state, "zip": zip5}
    if first:
        record["first_name"], record["last_name"] = first, last
    return record


def by_person(first: str, last: str, street: str, zip5: str) -> list[dict]:
    seed = f"person:{first.lower()}|{last.lower()}|{street.lower()}|{zip5}"
    if digest(seed, "match") % 100 < NO_MATCH_PERCENT:
        return []
    return [_resident(seed, 0, zip5, street=street, first=first, last=last)]


def by_address(street: str, zip5: str) -> list[dict]:
    seed = f"address:{street.lower()}|{zip5}"
    if digest(seed, "match") % 100 < NO_MATCH_PERCENT:
        return []
    return [_resident(seed, i, zip5, street=street) for i in range(1 + digest(seed, "n") % 4)]


@lru_cache(maxsize=256)
def _population(zip5: str) -> tuple[dict, ...]:
    seed = f"zip:{zip5}"
    return tuple(_resident(seed, i, zip5) for i in range(20 + digest(seed) % 80))


def by_zip(zip5: str, *, gender: str | None, min_age: int | None, max_age: int | None,
           income: str | None) -> list[dict]:
    """Everyone in the ZIP who passes the filters, in a stable order."""
    def keep(person: dict) -> bool:
        age = int(person["age"])
        return ((gender is None or person["gender"] == gender)
                and (min_age is None or age >= min_age) and (max_age is None or age <= max_age)
                and (income is None or person["demographics"]["income_range"].lower() == income.lower()))

    return [dict(p) for p in _population(zip5) if keep(p)]
