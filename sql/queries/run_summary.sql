-- One run: its counts and what it spent, by endpoint (a 404 "no data" counted apart from failed calls,
-- as in units_by_endpoint_since).
SELECT r.run_id, r.kind, r.status, r.started_at, r.finished_at, r.rows_in, r.valid, r.duplicates, r.rejected,
       c.endpoint, count(c.call_id) AS calls, sum(c.units) AS units,
       sum(c.units) FILTER (WHERE c.billing = 'unknown') AS possible_units,
       count(*) FILTER (WHERE (c.status >= 400 OR c.status IS NULL) AND c.call_id IS NOT NULL AND NOT c.no_data
                             AND coalesce(c.error_message, '') <> 'KeyAccepted')
           AS failed_calls,
       count(*) FILTER (WHERE c.no_data) AS no_data_calls,
       avg(c.latency_ms) AS average_latency_ms
FROM runs AS r
LEFT JOIN (
    SELECT *, coalesce(status = 404 AND coalesce(error_message, '') NOT IN ('FeatureNotEnabledError', 'InvalidRegionError'),
                       false) AS no_data
    FROM api_calls
) AS c USING (run_id)
WHERE r.run_id = $run_id
GROUP BY ALL
ORDER BY c.endpoint;
