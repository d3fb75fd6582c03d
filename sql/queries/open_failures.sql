-- Failures not yet resolved by a later success; $dataset NULL means every dataset.
SELECT vin, dataset, status, message, retryable, attempts, first_failed_at, fetched_at AS last_failed_at, run_id
FROM failures
WHERE resolved_at IS NULL AND ($dataset::VARCHAR IS NULL OR dataset = $dataset::VARCHAR)
ORDER BY dataset, vin;
