-- The newest run (the latest to arrive, whatever its clock said), for the report's header.
SELECT run_id, kind, status, started_at, finished_at, units_used, service
FROM runs ORDER BY run_seq DESC NULLS LAST, started_at DESC LIMIT 1;
