-- The run's roster VINs with what tells where each vehicle is registered (read by tasks/ingest/markets.py):
-- the file's state and country columns, and whether /specs decoded the VIN through its international fallback.
SELECT v.vin, v.state, v.extra->>'country' AS country, s.is_international AS specs_international
FROM vehicles AS v
LEFT JOIN specs AS s ON s.vin = v.vin
WHERE v.run_id = $run_id
ORDER BY v.vin;
