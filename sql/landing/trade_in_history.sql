-- Every answer's months as observed: one row per VIN, month and answer (its fetched_at), appended. A later
-- answer restating a month is another observation, never an overwrite; the same answer landed again (a replayed
-- journal, a re-parse) is the same rows: only what a re-parse reads differently is updated.
MERGE INTO trade_in_history AS t
USING (
    SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin, month, fetched_at ORDER BY run_id DESC) = 1
) AS s
ON t.vin = s.vin AND t.month = s.month AND t.fetched_at = s.fetched_at
WHEN MATCHED AND row(s.trade_in, s.valued_on, s.state, s.mileage, s.mileage_unit, s.condition, s.mileage_source)
                 IS DISTINCT FROM row(t.trade_in, t.valued_on, t.state, t.mileage, t.mileage_unit, t.condition,
                                      t.mileage_source)
    THEN UPDATE
WHEN NOT MATCHED THEN INSERT BY NAME;
