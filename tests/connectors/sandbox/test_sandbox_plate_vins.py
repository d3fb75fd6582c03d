"""A plate decodes to a real-looking VIN: North American ones pass their check digit, as a real decoder's do."""
from __future__ import annotations

from fleet_data.connectors.sandbox.plates import lookup
from fleet_data.connectors.sandbox.vehicles import synthetic_vin
from fleet_data.tasks.ingest.vins import check_digit


def test_north_american_vins_from_plates_carry_a_valid_check_digit():
    vins = [found["vin"] for i in range(60) if (found := lookup("US", "TX", f"CHK{i:03d}"))]
    vins += [synthetic_vin(f"any-{i}", us_only=False) for i in range(60)]
    north_american = [v for v in vins if v[0] in "12345"]
    assert len(north_american) > 40
    assert all(v[8] == check_digit(v) for v in north_american), [v for v in north_american if v[8] != check_digit(v)]
