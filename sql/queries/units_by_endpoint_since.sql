-- Calls and units per endpoint made at or after $since (e.g. the first of the month, UTC), whatever the clock of
-- the run that made them said: a call counts at its own time, or at the latest start of a run before its run (in
-- run order, run_seq; a start after $now counts as $now), if that is later. A run whose clock was behind is never
-- counted before the runs it came after; one dated ahead is counted from its own time on (no upper bound), and so
-- are the runs after it: spend is counted twice rather than missed.
-- A 404 "no data" is the service's answer for that VIN, not a failure: it is counted apart. (A 404 for a
-- feature the plan lacks or an unknown state/country is a failure, as its error class says.)
-- `units` counts calls never answered at what they may have cost (`billing = 'unknown'`), `possible_units` those alone.
WITH floors AS (
    SELECT run_id, max(least(started_at, $now::TIMESTAMPTZ))
               OVER (ORDER BY run_seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS not_before
    FROM runs
)
SELECT endpoint, count(*) AS calls, CAST(coalesce(sum(units), 0) AS BIGINT) AS units,
       CAST(coalesce(sum(units) FILTER (WHERE billing = 'unknown'), 0) AS BIGINT) AS possible_units,
       count(*) FILTER (WHERE billing = 'unknown') AS unknown_calls,
       count(*) FILTER (WHERE (status >= 400 OR status IS NULL) AND NOT no_data
                           AND coalesce(error_message, '') <> 'KeyAccepted') AS failed_calls,
       count(*) FILTER (WHERE no_data) AS no_data_calls
FROM (
    SELECT c.*, coalesce(c.status = 404 AND coalesce(c.error_message, '') NOT IN ('FeatureNotEnabledError', 'InvalidRegionError'),
                         false) AS no_data
    FROM api_calls AS c
    LEFT JOIN floors AS f USING (run_id)
    WHERE greatest(c.fetched_at, coalesce(f.not_before, c.fetched_at)) >= $since::TIMESTAMPTZ
)
GROUP BY endpoint
ORDER BY units DESC, endpoint;
