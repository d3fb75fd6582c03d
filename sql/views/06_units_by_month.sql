-- Calls and units spent per calendar month (UTC) and endpoint. A 404 "no data" is the service's answer
-- for that VIN, not a failure: counted apart (as `fleet status` does).
CREATE OR REPLACE VIEW units_by_month AS
SELECT
    date_trunc('month', timezone('UTC', fetched_at))::DATE AS month,
    endpoint,
    count(*) AS calls,
    CAST(coalesce(sum(units), 0) AS BIGINT) AS units,
    CAST(coalesce(sum(units) FILTER (WHERE billing = 'unknown'), 0) AS BIGINT) AS possible_units,
    count(*) FILTER (WHERE (status >= 400 OR status IS NULL) AND NOT no_data
                           AND coalesce(error_message, '') <> 'KeyAccepted') AS failed_calls,
    count(*) FILTER (WHERE no_data) AS no_data_calls
FROM (
    SELECT *, coalesce(status = 404 AND coalesce(error_message, '') NOT IN ('FeatureNotEnabledError', 'InvalidRegionError'),
                       false) AS no_data
    FROM api_calls
)
GROUP BY ALL;
