"""OBD-II trouble codes: any well-formed code (P/B/C/U + 4 hex digits) decodes, deterministically.

A fixed table holds the common codes (the SDKs' README example P0115 among them); every other
well-formed code gets a diagnosis built from what its characters mean (SAE J2012): the system,
generic or manufacturer-specific, and for powertrain codes the subsystem. Anything else is the
spec's 404 `Could not find code <code>`.
"""
from __future__ import annotations

import re

WELL_FORMED = re.compile(r"^[PBCU][0-9A-F]{4}$")

KNOWN = {
    "P0100": "Mass or Volume Air Flow Circuit Malfunction",
    "P0115": "Engine Coolant Temperature Circuit Malfunction",
    "P0171": "System Too Lean (Bank 1)",
    "P0300": "Random/Multiple Cylinder Misfire Detected",
    "P0301": "Cylinder 1 Misfire Detected",
    "P0420": "Catalyst System Efficiency Below Threshold (Bank 1)",
    "P0442": "Evaporative Emission Control System Leak Detected (small leak)",
    "P0455": "Evaporative Emission Control System Leak Detected (large leak)",
    "P0500": "Vehicle Speed Sensor Malfunction",
    "P0700": "Transmission Control System Malfunction",
    "C0035": "Left Front Wheel Speed Sensor Circuit",
    "B0001": "Driver Frontal Stage 1 Deployment Control",
    "U0100": "Lost Communication With ECM/PCM A",
}
SYSTEMS = {"P": "Powertrain", "B": "Body", "C": "Chassis", "U": "Network communication"}
POWERTRAIN_AREAS = {
    "0": "fuel, air metering and auxiliary emission controls", "1": "fuel and air metering",
    "2": "fuel and air metering (injector circuit)", "3": "ignition system or misfire",
    "4": "auxiliary emission controls", "5": "vehicle speed, idle control and auxiliary inputs",
    "6": "computer and output circuits", "7": "transmission", "8": "transmission", "9": "transmission",
    "A": "hybrid propulsion", "B": "hybrid propulsion", "C": "hybrid propulsion",
}


def normalize(raw: str | None) -> str:
    return (raw or "").strip().upper()


def diagnosis(code: str) -> str | None:
    """What a normalized code means, or None when it is not a well-formed OBD-II code."""
    if not WELL_FORMED.match(code):
        return None
    if code in KNOWN:
        return KNOWN[code]
    origin = "generic (SAE)" if code[1] in "02" else "manufacturer-specific"
    area = POWERTRAIN_AREAS.get(code[2], "reserved") if code[0] == "P" else f"module {code[2]}"
    return f"{SYSTEMS[code[0]]}, {area}: {origin} fault {code[1:]}"
