-- Open failures to fetch again: of one run ($run_id), or of every run ($run_id NULL), for $datasets.
SELECT DISTINCT dataset, vin
FROM failures
WHERE resolved_at IS NULL
  AND ($run_id::VARCHAR IS NULL OR run_id = $run_id::VARCHAR)
  AND list_contains($datasets::VARCHAR[], dataset)
ORDER BY dataset, vin;
