-- Each vehicle's value change over N months, as first observed (issue 26): its latest valuation's trade-in
-- against the trade-in of the month N months before it as first observed (trade_in_by_month), one row per N the
-- vehicle has a month for. `WHERE months = 6` is the change over six months; a value drop the service reports
-- shows as such, not rescaled by the latest answer. `same_request`: both were asked alike (state, mileage and
-- its unit, condition): like compared with like; false when the mileage (or another input) differed.
CREATE OR REPLACE VIEW vehicle_value_change AS
SELECT
    mv.vin, v.unit_number, v.fleet, mv.make, mv.model, mv.model_year,
    CAST(date_diff('month', h.month, date_trunc('month', mv.valued_on)::DATE) AS INTEGER) AS months,
    h.month AS since_month, h.trade_in AS trade_in_then, h.first_observed_at AS then_observed_at,
    h.first_observed_by AS then_observed_by, h.latest_trade_in AS then_as_restated,
    mv.valued_on, mv.trade_in AS trade_in_now, mv.fetched_at AS now_observed_at,
    mv.trade_in - h.trade_in AS change,
    round(100.0 * (mv.trade_in - h.trade_in) / nullif(h.trade_in, 0), 2) AS change_pct,
    h.first_asked.mileage AS mileage_then, mv.mileage AS mileage_now, mv.mileage_unit,
    row(h.first_asked.state, h.first_asked.mileage, h.first_asked.mileage_unit, h.first_asked.condition)
        IS NOT DISTINCT FROM row(mv.state, mv.mileage, mv.mileage_unit, mv.condition) AS same_request
FROM latest_market_values AS mv
JOIN vehicles AS v USING (vin)
JOIN trade_in_by_month AS h ON h.vin = mv.vin AND h.month < date_trunc('month', mv.valued_on)::DATE
WHERE mv.trade_in IS NOT NULL;
