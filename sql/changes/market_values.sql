-- A value move: the newest retail value differs from the VIN's latest one held by more than the run's
-- threshold (`value_move` in runs.parameters, percent; 10 when the run gave none). Compared before the
-- upsert, because a second valuation the same day replaces the first.
-- Like is compared with like: a `value_move` only between answers to the same request (state, mileage and its
-- unit, condition). The same move against a valuation asked otherwise (another mileage: the fleet file's, then a
-- higher history odometer) is a `revaluation`, the world not shown to have changed: both requests are recorded.
INSERT INTO changes BY NAME
WITH newest AS (
    SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin ORDER BY run_seq DESC, fetched_at DESC) = 1
), held AS (  -- the VIN's latest valuation held, in the order answers arrived (run_seq, then fetched_at)
    SELECT vin, arg_max(retail, (run_seq, fetched_at)) AS retail, arg_max(valued_on, (run_seq, fetched_at)) AS valued_on,
           arg_max({'state': state, 'mileage': mileage, 'mileage_unit': mileage_unit, 'mileage_source': mileage_source,
                    'condition': condition}, (run_seq, fetched_at)) AS asked,
           max((run_seq, fetched_at)) AS arrived
    FROM market_values WHERE vin IN (SELECT vin FROM newest) GROUP BY vin
)
SELECT n.run_id, n.vin, 'market_value' AS dataset,
       CASE WHEN row(n.state, n.mileage, n.mileage_unit, n.condition)
                 IS NOT DISTINCT FROM row(h.asked.state, h.asked.mileage, h.asked.mileage_unit, h.asked.condition)
            THEN 'value_move' ELSE 'revaluation' END AS kind,
       '' AS subject, 'info' AS severity,
       json_object('retail', h.retail, 'valued_on', h.valued_on, 'state', h.asked.state, 'mileage', h.asked.mileage,
                   'mileage_unit', h.asked.mileage_unit, 'mileage_source', h.asked.mileage_source,
                   'condition', h.asked.condition) AS before,
       json_object('retail', n.retail, 'valued_on', coalesce(n.valued_on, CAST(timezone('UTC', n.fetched_at) AS DATE)),
                   'state', n.state, 'mileage', n.mileage, 'mileage_unit', n.mileage_unit,
                   'mileage_source', n.mileage_source, 'condition', n.condition,
                   'change_pct', round(100.0 * (n.retail - h.retail) / h.retail, 2)) AS after,
       n.fetched_at, now() AS detected_at
FROM newest AS n
JOIN held AS h ON h.vin = n.vin AND h.arrived < (n.run_seq, n.fetched_at)
LEFT JOIN runs AS r ON r.run_id = n.run_id
WHERE h.retail > 0 AND n.retail IS NOT NULL
  AND abs(n.retail - h.retail) * 100.0 / h.retail > coalesce(TRY_CAST(r.parameters->>'value_move' AS DOUBLE), 10)
ON CONFLICT DO NOTHING;
