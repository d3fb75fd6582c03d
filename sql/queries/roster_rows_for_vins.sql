-- What the roster knows of $vins (state and mileage shape a valuation request); VINs not on it are absent.
SELECT vin, state, mileage FROM vehicles WHERE list_contains($vins::VARCHAR[], vin) ORDER BY vin;
