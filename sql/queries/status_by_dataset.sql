-- Per dataset ($datasets plus any that has answers or failures): roster VINs answered (found or no data),
-- of which "no data" (a 404: an answer, not a failure), roster VINs never answered (pending: the next
-- refresh calls for them), and open failures.
WITH datasets AS (
    SELECT unnest($datasets::VARCHAR[]) AS dataset
    UNION SELECT dataset FROM fetch_status
    UNION SELECT dataset FROM failures
), roster AS (
    SELECT count(*) AS vins FROM vehicles
), answered AS (
    SELECT f.dataset, count(*) AS vins, count(*) FILTER (WHERE f.outcome = 'no_data') AS no_data,
           max(f.fetched_at) AS last_fetched_at
    FROM fetch_status AS f SEMI JOIN vehicles AS v ON v.vin = f.vin
    GROUP BY f.dataset
), open_failures AS (
    SELECT dataset, count(*) AS vins, count(*) FILTER (WHERE retryable) AS retryable
    FROM failures WHERE resolved_at IS NULL GROUP BY dataset
)
SELECT d.dataset, r.vins AS roster, coalesce(a.vins, 0) AS answered, coalesce(a.no_data, 0) AS no_data,
       r.vins - coalesce(a.vins, 0) AS pending,
       coalesce(o.vins, 0) AS failed, coalesce(o.retryable, 0) AS failed_retryable, a.last_fetched_at
FROM datasets AS d
CROSS JOIN roster AS r
LEFT JOIN answered AS a USING (dataset)
LEFT JOIN open_failures AS o USING (dataset)
ORDER BY d.dataset;
