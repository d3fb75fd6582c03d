-- A value move: the newest retail value differs from the VIN's latest one held by more than the run's
-- threshold (`value_move` in runs.parameters, percent; 10 when the run gave none). Compared before the
-- upsert, because a second valuation the same day replaces the first.
INSERT INTO changes BY NAME
WITH newest AS (
    SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin ORDER BY run_seq DESC, fetched_at DESC) = 1
), held AS (  -- the VIN's latest valuation held, in the order answers arrived (run_seq, then fetched_at)
    SELECT vin, arg_max(retail, (run_seq, fetched_at)) AS retail, arg_max(valued_on, (run_seq, fetched_at)) AS valued_on,
           max((run_seq, fetched_at)) AS arrived
    FROM market_values WHERE vin IN (SELECT vin FROM newest) GROUP BY vin
)
SELECT n.run_id, n.vin, 'market_value' AS dataset, 'value_move' AS kind, '' AS subject, 'info' AS severity,
       json_object('retail', h.retail, 'valued_on', h.valued_on) AS before,
       json_object('retail', n.retail, 'valued_on', coalesce(n.valued_on, CAST(timezone('UTC', n.fetched_at) AS DATE)),
                   'change_pct', round(100.0 * (n.retail - h.retail) / h.retail, 2)) AS after,
       n.fetched_at, now() AS detected_at
FROM newest AS n
JOIN held AS h ON h.vin = n.vin AND h.arrived < (n.run_seq, n.fetched_at)
LEFT JOIN runs AS r ON r.run_id = n.run_id
WHERE h.retail > 0 AND n.retail IS NOT NULL
  AND abs(n.retail - h.retail) * 100.0 / h.retail > coalesce(TRY_CAST(r.parameters->>'value_move' AS DOUBLE), 10)
ON CONFLICT DO NOTHING;
