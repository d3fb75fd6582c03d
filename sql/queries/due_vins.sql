-- The run's roster VINs whose $dataset answer is missing or older than $fresh_after (all of them with $force).
SELECT v.vin, v.state, v.mileage, v.mileage_unit, v.condition, f.fetched_at AS last_fetched_at
FROM vehicles AS v
LEFT JOIN fetch_status AS f ON f.vin = v.vin AND f.dataset = $dataset
WHERE v.run_id = $run_id
  AND ($force OR f.fetched_at IS NULL OR f.fetched_at < $fresh_after::TIMESTAMPTZ)
ORDER BY v.vin;
