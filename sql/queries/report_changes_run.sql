-- The run whose changes the report shows: the latest finished refresh or backfill (as changes_latest_run).
SELECT run_id, kind, status, started_at, finished_at
FROM runs
WHERE finished_at IS NOT NULL AND kind IN ('refresh', 'backfill') AND status NOT IN ('planned', 'refused')
ORDER BY run_seq DESC NULLS LAST, started_at DESC LIMIT 1;
