-- The per-VIN recall lookups ($run_id) made: each is a complete, fresh recall check of that VIN.
SELECT vin, max(fetched_at) AS fetched_at
FROM recall_checks
WHERE run_id = $run_id AND checked_via = 'vin'
GROUP BY vin
ORDER BY vin;
