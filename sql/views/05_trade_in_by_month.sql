-- Each vehicle's trade-in value per month as first observed (issue 26), and as last restated. A month is
-- observed by a valuation made in it (market_values.trade_in) and by every later answer listing it in its
-- `trade_in_values` (trade_in_history, appended per answer). A later answer restates the past on its own scale
-- (a 30% drop rescales every month before it): the first observation is what was known then, so a change
-- over months compares what was seen at the time, not the past rescaled by the latest answer.
CREATE OR REPLACE VIEW trade_in_by_month AS
WITH observed AS (
    SELECT vin, date_trunc('month', valued_on)::DATE AS month, trade_in, fetched_at, run_id, 'valuation' AS observed_by,
           {'state': state, 'mileage': mileage, 'mileage_unit': mileage_unit, 'condition': condition} AS asked
    FROM market_values WHERE trade_in IS NOT NULL
    UNION ALL
    SELECT vin, month, trade_in, fetched_at, run_id, 'trade_in_values',
           {'state': state, 'mileage': mileage, 'mileage_unit': mileage_unit, 'condition': condition}
    FROM trade_in_history
)
SELECT vin, month,
    arg_min(trade_in, fetched_at) AS trade_in,
    min(fetched_at) AS first_observed_at,
    arg_min(observed_by, fetched_at) AS first_observed_by,
    arg_min(run_id, fetched_at) AS first_run_id,
    arg_min(asked, fetched_at) AS first_asked,
    arg_max(trade_in, fetched_at) AS latest_trade_in,
    max(fetched_at) AS latest_observed_at,
    count(*) AS observations
FROM observed
GROUP BY vin, month;
