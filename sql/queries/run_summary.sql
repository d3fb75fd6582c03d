-- One run: its counts and what it spent, by endpoint.
SELECT r.run_id, r.kind, r.status, r.started_at, r.finished_at, r.rows_in, r.valid, r.duplicates, r.rejected,
       c.endpoint, count(c.call_id) AS calls, sum(c.units) AS units,
       count(*) FILTER (WHERE c.status >= 400 OR c.status IS NULL) AS failed_calls,
       avg(c.latency_ms) AS average_latency_ms
FROM runs AS r
LEFT JOIN api_calls AS c USING (run_id)
WHERE r.run_id = $run_id
GROUP BY ALL
ORDER BY c.endpoint;
