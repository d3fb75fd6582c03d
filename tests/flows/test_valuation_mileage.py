"""Valuations are asked with the mileage the view `vehicle_mileage` chooses (issue 21): the fleet file's,
unless the latest history odometer is higher; a refresh against the sandbox, history first, then values."""

from __future__ import annotations

import pytest

from fleet_data.flows.refresh import refresh_fleet
from fleet_data.tasks.settings import RefreshOptions
from fleet_data.tasks.datasets import valuation_request

pytestmark = pytest.mark.usefixtures("prefect_server")


def test_a_valuation_after_the_history_sends_the_higher_odometer(service, fleet_file, db_path, read):
    service()
    fleet = fleet_file(40)
    assert refresh_fleet([fleet], RefreshOptions(db=db_path, lake=None, datasets=["history"]))["status"] == "completed"
    conflicts = dict(read(db_path, "SELECT vin, latest_odometer FROM mileage_conflicts"))
    assert len(conflicts) >= 3  # the sample's first 40 vehicles hold some
    assert refresh_fleet([fleet], RefreshOptions(db=db_path, lake=None, datasets=["market_value"]))["status"] == "completed"
    sent = {vin: mileage for vin, mileage in read(db_path, "SELECT vin, mileage FROM market_values")}
    chosen = read(db_path, "SELECT m.vin, v.state, m.valuation_mileage, m.valuation_mileage_unit, v.mileage "
                           "FROM vehicle_mileage AS m JOIN vehicles AS v USING (vin) WHERE m.vin IN "
                           "(SELECT vin FROM market_values)")
    assert len(chosen) == len(sent) > 30
    for vin, state, mileage, unit, file_mileage in chosen:
        asked = valuation_request({"state": state, "mileage": mileage, "mileage_unit": unit})
        assert sent[vin] == asked["mileage"], vin
        if vin in conflicts:
            assert sent[vin] == conflicts[vin] > file_mileage  # the odometer, not the file's lower figure
