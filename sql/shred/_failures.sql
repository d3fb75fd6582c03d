-- The VINs that failed -> `failures` rows, with the attempts each had; an answer that is not a JSON object
-- fails its VIN (status 200, not retried). A retry handed to the next chunk settles in that chunk's
-- journal, so the attempt number the call carries counts, not only the rows this journal holds.
WITH tries AS (SELECT vin, greatest(count(call_id), coalesce(max(attempt), 0)) AS n FROM answers GROUP BY vin)
SELECT a.vin, $dataset AS dataset, a.status, a.message, a.retryable,
    CAST(greatest(coalesce(t.n, 0), 1) AS INTEGER) AS attempts, a.answered_at AS fetched_at, $endpoint AS endpoint
FROM answers AS a LEFT JOIN tries AS t ON t.vin = a.vin
WHERE a.outcome = 'failed'
UNION ALL
SELECT m.vin, $dataset AS dataset, 200 AS status,
    $endpoint || ' answered 200 with a body that is not a JSON object' AS message, false AS retryable,
    CAST(coalesce(t.n, 0) AS INTEGER) AS attempts, m.fetched_at, $endpoint AS endpoint
FROM malformed AS m LEFT JOIN tries AS t ON t.vin = m.vin;
