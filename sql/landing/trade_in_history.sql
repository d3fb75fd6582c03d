-- One value per VIN and month: the newest answer's (a later valuation restates the months before it); an older
-- answer landing late never replaces a newer one (older in the order answers arrived: run_seq, then fetched_at).
MERGE INTO trade_in_history AS t
USING (
    SELECT * FROM incoming
    QUALIFY row_number() OVER (PARTITION BY vin, month ORDER BY fetched_at DESC) = 1
) AS s
ON t.vin = s.vin AND t.month = s.month
-- The same figure again (a forced refresh, a replayed journal, a re-parse): only the receipt moves on.
WHEN MATCHED AND (s.run_seq, s.fetched_at) >= (t.run_seq, t.fetched_at)
         AND row(s.trade_in, s.valued_on, s.state, s.mileage, s.mileage_unit, s.condition)
             IS NOT DISTINCT FROM row(t.trade_in, t.valued_on, t.state, t.mileage, t.mileage_unit, t.condition)
    THEN UPDATE SET run_id = s.run_id, fetched_at = s.fetched_at, run_seq = s.run_seq, service = s.service
WHEN MATCHED AND (s.run_seq, s.fetched_at) >= (t.run_seq, t.fetched_at) THEN UPDATE
WHEN NOT MATCHED THEN INSERT BY NAME;
