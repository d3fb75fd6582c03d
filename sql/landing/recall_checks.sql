UPDATE incoming SET campaigns_listed = coalesce(campaigns_listed, false);

MERGE INTO recall_checks AS t
USING (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin, run_id, checked_via ORDER BY fetched_at DESC) = 1) AS s
ON t.vin = s.vin AND t.run_id = s.run_id AND t.checked_via = s.checked_via
WHEN MATCHED THEN UPDATE
WHEN NOT MATCHED THEN INSERT BY NAME;

-- A check that listed every open campaign closes the campaigns it no longer lists (seen before it, in the order
-- answers arrived: run_seq, then fetched_at).
UPDATE recalls AS r
SET closed_at = c.fetched_at
FROM (SELECT vin, max(run_seq) AS run_seq, max(fetched_at) AS fetched_at FROM incoming WHERE campaigns_listed GROUP BY vin) AS c
WHERE r.vin = c.vin AND r.closed_at IS NULL AND (r.run_seq, r.last_seen_at) < (c.run_seq, c.fetched_at);
