-- The newest valuation of each VIN (any state, mileage or condition).
CREATE OR REPLACE VIEW latest_market_values AS
SELECT *
FROM market_values
QUALIFY row_number() OVER (PARTITION BY vin ORDER BY valued_on DESC, fetched_at DESC) = 1;
