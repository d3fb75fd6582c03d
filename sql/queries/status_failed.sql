-- The open failures (vin_status: failed), grouped by dataset, status, whether worth asking again and message:
-- what `fleet status` lists under "Failed", most VINs first.
SELECT dataset, http_status, retryable, reason AS message, count(*) AS vins, max(attempts) AS most_attempts
FROM vin_status WHERE status = 'failed'
GROUP BY ALL
ORDER BY vins DESC, dataset, http_status, message
LIMIT $limit;
