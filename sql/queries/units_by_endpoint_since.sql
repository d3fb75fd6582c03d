-- Calls and units per endpoint made at or after $since (e.g. the first of the month, UTC).
SELECT endpoint, count(*) AS calls, CAST(coalesce(sum(units), 0) AS BIGINT) AS units,
       count(*) FILTER (WHERE status >= 400 OR status IS NULL) AS failed_calls
FROM api_calls
WHERE fetched_at >= $since::TIMESTAMPTZ
GROUP BY endpoint
ORDER BY units DESC, endpoint;
