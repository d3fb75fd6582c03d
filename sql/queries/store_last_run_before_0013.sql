-- `store_last_run` of a file published before migration 0013: runs were ordered by their start times then.
SELECT run_id, started_at, greatest(started_at, coalesce(finished_at, started_at)) AS recorded_at
FROM runs
ORDER BY started_at DESC
LIMIT 1;
