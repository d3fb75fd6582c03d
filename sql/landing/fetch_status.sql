-- Latest successful answer per VIN and dataset; an older answer landing late changes nothing.
MERGE INTO fetch_status AS t
USING (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin, dataset ORDER BY fetched_at DESC) = 1) AS s
ON t.vin = s.vin AND t.dataset = s.dataset
WHEN MATCHED AND s.fetched_at >= t.fetched_at THEN UPDATE SET outcome = s.outcome, run_id = s.run_id, fetched_at = s.fetched_at
WHEN NOT MATCHED THEN INSERT BY NAME;

-- A successful answer (data or a stable "no data") resolves that VIN's open failure for the dataset.
UPDATE failures AS f
SET resolved_at = s.fetched_at, resolved_run_id = s.run_id
FROM (SELECT vin, dataset, max(fetched_at) AS fetched_at, arg_max(run_id, fetched_at) AS run_id
      FROM incoming GROUP BY vin, dataset) AS s
WHERE f.vin = s.vin AND f.dataset = s.dataset AND f.resolved_at IS NULL AND f.fetched_at <= s.fetched_at;
