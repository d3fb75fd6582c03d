-- Every call attempt the journal holds -> `api_calls` rows (the journal keeps no `replayed` flag). A call sent and
-- never answered (killed in flight, timed out) is `billing = 'unknown'`, its units what it may have cost; a
-- journal of the first format has no `billing`: its calls all had an answer or were recorded as 0 units.
SELECT call_id, path AS endpoint, method, vin, batch_id, status, units, latency_ms,
    attempt, error AS error_message, false AS replayed, called_at AS fetched_at,
    coalesce(billing, 'known') AS billing
FROM answers WHERE call_id IS NOT NULL;
