-- History: one row per VIN, day and request (state, mileage and its unit, condition); a re-fetch the same
-- day replaces it (a newer one in the order answers arrived: run_seq, then fetched_at).
MERGE INTO market_values AS t
USING (
    SELECT * REPLACE (coalesce(valued_on, CAST(timezone('UTC', fetched_at) AS DATE)) AS valued_on)
    FROM incoming
    QUALIFY row_number() OVER (
        PARTITION BY vin, coalesce(valued_on, CAST(timezone('UTC', fetched_at) AS DATE)), state, mileage, mileage_unit,
                     condition
        ORDER BY fetched_at DESC) = 1
) AS s
ON t.vin = s.vin AND t.valued_on = s.valued_on AND t.state IS NOT DISTINCT FROM s.state
   AND t.mileage IS NOT DISTINCT FROM s.mileage AND t.mileage_unit IS NOT DISTINCT FROM s.mileage_unit
   AND t.condition IS NOT DISTINCT FROM s.condition
-- The same data again (a forced refresh, a replayed journal, a re-parse): only the receipt moves on, so
-- identical rows do not pay a whole-row update.
WHEN MATCHED AND (s.run_seq, s.fetched_at) >= (t.run_seq, t.fetched_at) AND row(s.mileage_source, s.country, s.model_year, s.make, s.model, s.series, s.style, s.uvc, s.publish_date, s.retail, s.trade_in, s.rough_trade_in, s.average_trade_in, s.loan_value, s.msrp, s.retail_equipped, s.valuation_groups, s.auction_values, s.mileage_list, s.add_deduct_list)
         IS NOT DISTINCT FROM row(t.mileage_source, t.country, t.model_year, t.make, t.model, t.series, t.style, t.uvc, t.publish_date, t.retail, t.trade_in, t.rough_trade_in, t.average_trade_in, t.loan_value, t.msrp, t.retail_equipped, t.valuation_groups, t.auction_values, t.mileage_list, t.add_deduct_list)
    THEN UPDATE SET run_id = s.run_id, fetched_at = s.fetched_at, run_seq = s.run_seq, service = s.service
WHEN MATCHED AND (s.run_seq, s.fetched_at) >= (t.run_seq, t.fetched_at) THEN UPDATE
WHEN NOT MATCHED THEN INSERT BY NAME;
