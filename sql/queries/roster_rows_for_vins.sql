-- What the roster knows of $vins (state, mileage, condition shape a valuation request); VINs not on it are absent.
SELECT vin, state, mileage, mileage_unit, condition FROM vehicles WHERE list_contains($vins::VARCHAR[], vin) ORDER BY vin;
