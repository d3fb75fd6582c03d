-- What the roster knows of $vins (state, mileage, condition shape a valuation request); VINs not on it are absent.
-- The mileage is the one valuations use (the view vehicle_mileage: the file's, or a higher history reading), with
-- where it comes from; the country column (the vehicle's market: tasks/ingest/markets.py). Through the view's
-- table macro, so only these VINs' reports are read.
SELECT m.vin, v.state, m.valuation_mileage AS mileage, m.valuation_mileage_unit AS mileage_unit,
       m.valuation_mileage_source AS mileage_source, v.condition, v.extra->>'country' AS country
FROM vehicle_mileage_of($vins::VARCHAR[]) AS m
JOIN vehicles AS v ON v.vin = m.vin
ORDER BY m.vin;
