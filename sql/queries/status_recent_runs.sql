-- The latest $limit runs (in the order they arrived, run_seq, whatever their clocks said), the service each called,
-- with what they spent: what the run recorded when it finished (known plus possible), else
-- (a killed run) the call ledger's sum, its calls in flight counted at what they may have cost (`possible_units`).
SELECT r.run_id, r.run_seq, r.kind, r.status, r.service, r.started_at, r.finished_at, r.rows_in, r.valid, r.rejected,
       CAST(coalesce(r.units_used, c.units, 0) AS BIGINT) AS units, CAST(coalesce(c.possible_units, 0) AS BIGINT) AS possible_units,
       coalesce(c.calls, 0) AS calls, r.message
FROM runs AS r
LEFT JOIN (SELECT run_id, count(*) AS calls, sum(units) AS units,
                  sum(units) FILTER (WHERE billing = 'unknown') AS possible_units
           FROM api_calls GROUP BY run_id) AS c USING (run_id)
ORDER BY r.run_seq DESC NULLS LAST, r.started_at DESC, r.run_id DESC
LIMIT $limit;
