-- Value over time per vehicle and condition, with the change since the previous valuation. `same_request`: the
-- previous valuation was asked alike (state, mileage and its unit): false when it was asked at another mileage
-- (the fleet file's, then a higher history odometer), a revaluation rather than the world's value moving.
CREATE OR REPLACE VIEW vehicle_value_trend AS
SELECT
    mv.vin, v.unit_number, v.fleet, mv.make, mv.model, mv.model_year,
    mv.valued_on, mv.condition, mv.state, mv.mileage,
    mv.retail, mv.trade_in, mv.loan_value,
    lag(mv.retail) OVER w AS previous_retail,
    mv.retail - lag(mv.retail) OVER w AS retail_change,
    round(100.0 * (mv.retail - lag(mv.retail) OVER w) / nullif(lag(mv.retail) OVER w, 0), 2) AS retail_change_pct,
    mv.trade_in - lag(mv.trade_in) OVER w AS trade_in_change,
    mv.publish_date AS published_on,
    mv.mileage_unit, mv.mileage_source,
    lag(mv.mileage) OVER w AS previous_mileage,
    CASE WHEN lag(mv.fetched_at) OVER w IS NOT NULL
         THEN row(mv.state, mv.mileage, mv.mileage_unit)
              IS NOT DISTINCT FROM row(lag(mv.state) OVER w, lag(mv.mileage) OVER w, lag(mv.mileage_unit) OVER w)
    END AS same_request
FROM market_values AS mv
LEFT JOIN vehicles AS v USING (vin)
WINDOW w AS (PARTITION BY mv.vin, mv.condition ORDER BY mv.run_seq, mv.valued_on, mv.fetched_at);  -- run_seq: arrival order
