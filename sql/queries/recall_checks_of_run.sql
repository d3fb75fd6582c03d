-- The per-VIN recall lookups ($run_id) made: each is a complete, fresh recall check of that VIN
-- (`no_data` when the service answered 404: it has no recall data for the VIN).
SELECT vin, max(fetched_at) AS fetched_at,
       arg_max(CASE WHEN recall_count IS NULL THEN 'no_data' ELSE 'found' END, fetched_at) AS outcome
FROM recall_checks
WHERE run_id = $run_id AND checked_via = 'vin'
GROUP BY vin
ORDER BY vin;
