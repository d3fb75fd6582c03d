-- The planner's one read of the roster (tasks/plan/due.py): the run's roster VINs in VIN order, with the
-- valuation inputs a due list carries and what tells where each vehicle is registered (tasks/ingest/markets.py).
SELECT v.vin, v.state, v.mileage, v.mileage_unit, v.condition,
       v.extra->>'country' AS country, s.is_international AS specs_international
FROM vehicles AS v
LEFT JOIN specs AS s ON s.vin = v.vin
WHERE v.run_id = $run_id
ORDER BY v.vin;
