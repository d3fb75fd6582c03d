-- The database's last run in the order runs arrived (run_seq), and the latest time it recorded: a run whose clock
-- is behind it was started by a clock that is wrong now, or was wrong then (tasks/plan/provenance.py).
SELECT run_id, started_at, greatest(started_at, coalesce(finished_at, started_at)) AS recorded_at
FROM runs
ORDER BY run_seq DESC NULLS LAST, started_at DESC
LIMIT 1;
