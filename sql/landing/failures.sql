-- One open failure per (VIN, dataset). Attempts add up across runs; re-landing the same run's
-- chunk replaces that run's contribution instead of adding it again (idempotent).
-- "Older" and "newer" are in the order answers arrived: (run_seq, fetched_at); a resolution's place is that of
-- the run that resolved it (resolved_run_id).
UPDATE incoming SET attempts = coalesce(attempts, 1), run_attempts = coalesce(attempts, 1),
    first_failed_at = fetched_at, resolved_at = NULL, resolved_run_id = NULL;

MERGE INTO failures AS t
USING (
    SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin, dataset ORDER BY run_seq DESC, fetched_at DESC) = 1
) AS s
ON t.vin = s.vin AND t.dataset = s.dataset
-- A failure older than the success that resolved it (a late replay) changes nothing.
WHEN MATCHED AND (s.run_seq, s.fetched_at) >= (t.run_seq, t.fetched_at)
     AND (t.resolved_at IS NULL OR (s.run_seq, s.fetched_at)
          > (coalesce((SELECT r.run_seq FROM runs AS r WHERE r.run_id = t.resolved_run_id), 0), t.resolved_at))
THEN UPDATE SET
    status = s.status, message = s.message, retryable = s.retryable,
    attempts = CASE
        WHEN t.resolved_at IS NOT NULL THEN s.attempts  -- a new episode (the condition above: after the resolution)
        WHEN t.run_id = s.run_id THEN t.attempts - t.run_attempts + s.attempts
        ELSE t.attempts + s.attempts END,
    run_attempts = s.attempts,
    first_failed_at = CASE WHEN t.resolved_at IS NOT NULL THEN s.fetched_at ELSE t.first_failed_at END,
    resolved_at = NULL, resolved_run_id = NULL,
    run_id = s.run_id, fetched_at = s.fetched_at, run_seq = s.run_seq, service = s.service
WHEN NOT MATCHED THEN INSERT BY NAME;
