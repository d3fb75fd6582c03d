-- Value over time per vehicle and condition, with the change since the previous valuation.
CREATE OR REPLACE VIEW vehicle_value_trend AS
SELECT
    mv.vin, v.unit_number, v.fleet, mv.make, mv.model, mv.model_year,
    mv.valued_on, mv.condition, mv.state, mv.mileage,
    mv.retail, mv.trade_in, mv.loan_value,
    lag(mv.retail) OVER w AS previous_retail,
    mv.retail - lag(mv.retail) OVER w AS retail_change,
    round(100.0 * (mv.retail - lag(mv.retail) OVER w) / nullif(lag(mv.retail) OVER w, 0), 2) AS retail_change_pct,
    mv.trade_in - lag(mv.trade_in) OVER w AS trade_in_change,
    mv.publish_date AS published_on
FROM market_values AS mv
LEFT JOIN vehicles AS v USING (vin)
WINDOW w AS (PARTITION BY mv.vin, mv.condition ORDER BY mv.run_seq, mv.valued_on, mv.fetched_at);  -- run_seq: arrival order
