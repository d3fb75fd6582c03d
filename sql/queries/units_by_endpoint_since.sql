-- Calls and units per endpoint made at or after $since (e.g. the first of the month, UTC).
-- A 404 "no data" is the service's answer for that VIN, not a failure: it is counted apart. (A 404 for a
-- feature the plan lacks or an unknown state/country is a failure, as its error class says.)
-- `units` counts calls never answered at what they may have cost (`billing = 'unknown'`), `possible_units` those alone.
SELECT endpoint, count(*) AS calls, CAST(coalesce(sum(units), 0) AS BIGINT) AS units,
       CAST(coalesce(sum(units) FILTER (WHERE billing = 'unknown'), 0) AS BIGINT) AS possible_units,
       count(*) FILTER (WHERE billing = 'unknown') AS unknown_calls,
       count(*) FILTER (WHERE (status >= 400 OR status IS NULL) AND NOT no_data) AS failed_calls,
       count(*) FILTER (WHERE no_data) AS no_data_calls
FROM (
    SELECT *, coalesce(status = 404 AND coalesce(error_message, '') NOT IN ('FeatureNotEnabledError', 'InvalidRegionError'),
                       false) AS no_data
    FROM api_calls
    WHERE fetched_at >= $since::TIMESTAMPTZ
)
GROUP BY endpoint
ORDER BY units DESC, endpoint;
