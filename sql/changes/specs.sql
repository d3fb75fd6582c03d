-- A VIN that now decodes differently: year, make, model or trim differ from the decode held before.
-- Only an answer newer than the one held (in the order answers arrived: run_seq, then fetched_at) compares (a late
-- replay or a re-parse is no change).
INSERT INTO changes BY NAME
SELECT i.run_id, i.vin, 'specs' AS dataset, 'decode_changed' AS kind, '' AS subject, 'info' AS severity,
       json_object('year', s.year, 'make', s.make, 'model', s.model, 'trim', s.trim) AS before,
       json_object('year', i.year, 'make', i.make, 'model', i.model, 'trim', i.trim) AS after,
       i.fetched_at, now() AS detected_at
FROM (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin ORDER BY run_seq DESC, fetched_at DESC) = 1) AS i
JOIN specs AS s ON s.vin = i.vin AND (s.run_seq, s.fetched_at) < (i.run_seq, i.fetched_at)
WHERE s.year IS DISTINCT FROM i.year OR s.make IS DISTINCT FROM i.make OR s.model IS DISTINCT FROM i.model
   OR s.trim IS DISTINCT FROM i.trim
ON CONFLICT DO NOTHING;
