-- A successful fetch resolves the open failure of the same VIN and dataset (if it is not newer, in the order
-- answers arrived: run_seq, then fetched_at). The answer's run_seq is its run's (a dataset's table need not carry it).
UPDATE failures AS f
SET resolved_at = s.fetched_at, resolved_run_id = s.run_id
FROM (SELECT i.vin, max(i.fetched_at) AS fetched_at, arg_max(i.run_id, i.fetched_at) AS run_id,
             coalesce(max(r.run_seq), 0) AS run_seq
      FROM incoming AS i LEFT JOIN runs AS r ON r.run_id = i.run_id GROUP BY i.vin) AS s
WHERE f.vin = s.vin AND f.dataset = $dataset AND f.resolved_at IS NULL
  AND (f.run_seq, f.fetched_at) <= (s.run_seq, s.fetched_at);
