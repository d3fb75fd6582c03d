"""The synthetic fleet every contender reads, and the exact calls a VIN stands for.

VINs are drawn with a fixed seed and kept only when the sandbox has data for them on every endpoint
(no 404s, no fault-trigger endings), so each contender's 3N calls should all answer 200.
The first 1,000 VINs of the 10,000-VIN fleet are the 1,000-VIN fleet: one warm-up covers both.
"""
from __future__ import annotations

import csv
import random
from pathlib import Path
from urllib.parse import urlencode

DATASETS = ("specs", "market_value", "history")
PATHS = {"specs": "/specs", "market_value": "/v2/marketvalue", "history": "/history"}
STATE, MILEAGE = "CA", 42_000
_WMIS = ["1FA", "1FT", "1G1", "1HG", "2T1", "4T1", "5YJ", "1C4", "1N4", "3VW"]
_CHARS = "ABCDEFGHJKLMNPRSTUVWXYZ0123456789"


def fleet_vins(n: int, seed: int = 1, only_with_data: bool = True) -> list[str]:
    """`n` distinct valid VINs in a fixed order (a prefix of any longer fleet); by default only VINs
    with data everywhere (other benchmarks want the sandbox's occasional 404 too)."""
    # Imported here: contenders only read the fleet and should not pay for loading the sandbox.
    from fleet_data.connectors.sandbox.vehicles import vehicle
    from fleet_data.tasks.ingest.vins import check_digit

    rng = random.Random(seed)
    seen: set[str] = set()
    vins: list[str] = []
    while len(vins) < n:
        body = rng.choice(_WMIS) + "".join(rng.choice(_CHARS) for _ in range(6))
        body += rng.choice("EFGHJKLMN") + rng.choice(_CHARS)
        body += "".join(rng.choice("0123456789") for _ in range(5)) + "7"  # never a fault-trigger ending
        vin = body[:8] + check_digit(body) + body[9:]
        if vin not in seen and (not only_with_data or vehicle(vin).has_data):
            seen.add(vin)
            vins.append(vin)
    return vins


def write_fleet(path: Path, n: int, seed: int = 1) -> Path:
    """The fleet as a user would hand it to `fleet refresh`: vin, state, mileage."""
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["vin", "state", "mileage"])
        writer.writerows([vin, STATE, MILEAGE] for vin in fleet_vins(n, seed))
    return path


def read_fleet(path: str | Path) -> list[dict[str, str]]:
    with open(path, newline="") as source:
        return list(csv.DictReader(source))


def params(dataset: str, row: dict[str, str]) -> dict[str, str]:
    """The query `fleet refresh` sends for this row (the key is added by each contender)."""
    if dataset == "market_value":
        # As ours does: the roster's state and mileage, and condition "clean" once a mileage is known.
        return {"vin": row["vin"], "state": row["state"], "mileage": row["mileage"], "condition": "clean"}
    return {"vin": row["vin"]}


def urls(base_url: str, key: str, rows: list[dict[str, str]]) -> list[tuple[str, str]]:
    """(dataset, full URL) for every call, dataset by dataset as `fleet refresh` plans them."""
    return [(dataset, f"{base_url}{PATHS[dataset]}?{urlencode({**params(dataset, row), 'key': key})}")
            for dataset in DATASETS for row in rows]
