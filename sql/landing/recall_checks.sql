UPDATE incoming SET campaigns_listed = coalesce(campaigns_listed, false);

MERGE INTO recall_checks AS t
USING (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin, run_id, checked_via ORDER BY fetched_at DESC) = 1) AS s
ON t.vin = s.vin AND t.run_id = s.run_id AND t.checked_via = s.checked_via
WHEN MATCHED THEN UPDATE
WHEN NOT MATCHED THEN INSERT BY NAME;

-- A check that listed every open campaign closes the campaigns it no longer lists (seen before it, in the order
-- answers arrived: run_seq, then fetched_at); a model's list (`model`) closes only campaigns it made likely, never
-- one an answer for the VIN confirmed (sql/landing/recalls.sql).
UPDATE recalls AS r
SET closed_at = CASE WHEN r.matched_by = 'model' THEN c.listed_at ELSE c.vin_listed_at END
FROM (SELECT vin, max(run_seq) AS listed_seq, arg_max(fetched_at, (run_seq, fetched_at)) AS listed_at,
             max(run_seq) FILTER (WHERE checked_via <> 'model') AS vin_listed_seq,
             arg_max(fetched_at, (run_seq, fetched_at)) FILTER (WHERE checked_via <> 'model') AS vin_listed_at
      FROM incoming WHERE campaigns_listed GROUP BY vin) AS c
WHERE r.vin = c.vin AND r.closed_at IS NULL
  AND CASE WHEN r.matched_by = 'model' THEN (r.run_seq, r.last_seen_at) < (c.listed_seq, c.listed_at)
           ELSE (r.run_seq, r.last_seen_at) < (c.vin_listed_seq, c.vin_listed_at) END;
