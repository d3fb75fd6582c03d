-- The newest run, for the report's header.
SELECT run_id, kind, status, started_at, finished_at, units_used
FROM runs ORDER BY started_at DESC LIMIT 1;
