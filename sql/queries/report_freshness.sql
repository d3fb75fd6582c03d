-- How fresh each dataset is across the roster. $datasets and $window_hours (parallel lists) give each
-- dataset's freshness window, $no_data_hours the window of a 404 "no data" (tasks/plan/due.py); $now the clock.
-- stale: answered, but older than its window, or dated after $future_after (a clock that was ahead): the next
-- refresh asks again; never_answered: no answer yet
-- (vehicles outside a dataset's markets never get one); failed: open failures.
WITH windows AS (
    SELECT unnest($datasets::VARCHAR[]) AS dataset, unnest($window_hours::BIGINT[]) AS window_hours
), roster AS (
    SELECT count(*) AS vins FROM vehicles
), answers AS (
    SELECT f.dataset, f.outcome, f.fetched_at,
           f.fetched_at < $now::TIMESTAMPTZ - to_hours(CASE WHEN f.outcome = 'no_data'
               THEN least(w.window_hours, $no_data_hours::BIGINT) ELSE w.window_hours END)
           OR f.fetched_at > $future_after::TIMESTAMPTZ AS stale
    FROM fetch_status AS f
    JOIN windows AS w USING (dataset)
    SEMI JOIN vehicles AS v ON v.vin = f.vin
), answered AS (
    SELECT dataset, count(*) AS answered, count(*) FILTER (WHERE outcome = 'no_data') AS no_data,
           count(*) FILTER (WHERE stale) AS stale, min(fetched_at) AS oldest_answer, max(fetched_at) AS newest_answer
    FROM answers GROUP BY dataset
), open_failures AS (
    SELECT dataset, count(*) AS failed FROM failures SEMI JOIN vehicles USING (vin)
    WHERE resolved_at IS NULL GROUP BY dataset
)
SELECT w.dataset, w.window_hours, r.vins AS roster,
       coalesce(a.answered, 0) - coalesce(a.stale, 0) AS fresh,
       coalesce(a.stale, 0) AS stale,
       r.vins - coalesce(a.answered, 0) AS never_answered,
       coalesce(a.no_data, 0) AS no_data,
       coalesce(o.failed, 0) AS failed,
       a.oldest_answer, a.newest_answer
FROM windows AS w
CROSS JOIN roster AS r
LEFT JOIN answered AS a USING (dataset)
LEFT JOIN open_failures AS o USING (dataset)
ORDER BY w.dataset;
