-- One row per plate lookup: a history across runs. The same run's lookup landed again replaces itself
-- (state may be NULL, hence IS NOT DISTINCT FROM rather than a primary key).
MERGE INTO plate_resolutions AS t
USING (SELECT * FROM incoming
       QUALIFY row_number() OVER (PARTITION BY run_id, country, state, plate ORDER BY fetched_at DESC) = 1) AS s
ON t.run_id = s.run_id AND t.country = s.country AND t.state IS NOT DISTINCT FROM s.state AND t.plate = s.plate
WHEN MATCHED THEN UPDATE SET vin = s.vin, outcome = s.outcome, status = s.status, message = s.message,
    fetched_at = s.fetched_at
WHEN NOT MATCHED THEN INSERT BY NAME;
