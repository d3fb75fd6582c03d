-- Every call attempt the journal holds -> `api_calls` rows (the journal keeps no `replayed` flag).
SELECT call_id, path AS endpoint, method, vin, CAST(NULL AS VARCHAR) AS batch_id, status, units, latency_ms,
    attempt, error AS error_message, false AS replayed, called_at AS fetched_at
FROM answers WHERE call_id IS NOT NULL;
