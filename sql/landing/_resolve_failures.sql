-- A successful fetch resolves the open failure of the same VIN and dataset (if it is not newer).
UPDATE failures AS f
SET resolved_at = s.fetched_at, resolved_run_id = s.run_id
FROM (SELECT vin, max(fetched_at) AS fetched_at, arg_max(run_id, fetched_at) AS run_id FROM incoming GROUP BY vin) AS s
WHERE f.vin = s.vin AND f.dataset = $dataset AND f.resolved_at IS NULL AND f.fetched_at <= s.fetched_at;
