-- What the fleet was worth at the end of each month, by make and fleet/depot (the fleet file's `fleet`
-- column). Each roster vehicle counts with its latest valuation made on or before that month (a value
-- carries forward until the next one), so a month without a refresh keeps the fleet whole; the months
-- run from the first valuation to the current one, whose figures are today's value. Before a vehicle's
-- first valuation, the months its answers listed in `trade_in_values` (trade_in_history, as first observed)
-- count with that month's trade-in value alone (the service sends no retail or loan value for them): six months of trend
-- from the first run.
CREATE OR REPLACE VIEW fleet_value_by_month AS
WITH monthly AS (
    -- Each vehicle's last valuation in each month it was valued.
    SELECT
        mv.vin, date_trunc('month', mv.valued_on)::DATE AS valued_month,
        mv.retail, mv.trade_in, mv.loan_value, mv.make, mv.model_year
    FROM market_values AS mv
    SEMI JOIN vehicles AS v ON v.vin = mv.vin
    QUALIFY row_number() OVER (PARTITION BY mv.vin, date_trunc('month', mv.valued_on)
                               ORDER BY mv.run_seq DESC, mv.valued_on DESC, mv.fetched_at DESC) = 1
),
spans AS (
    -- Valid from its month until the vehicle's next valued month.
    SELECT *, lead(valued_month) OVER (PARTITION BY vin ORDER BY valued_month) AS next_valued_month
    FROM monthly
),
first_valued AS (
    SELECT vin, min(valued_month) AS first_month, arg_min(make, valued_month) AS make FROM monthly GROUP BY vin
),
history AS (
    -- The service's trade-in values of the months before the vehicle's first valuation, as first observed
    -- (trade_in_by_month: a later answer's restatement does not rescale the past).
    SELECT h.vin, h.month, h.trade_in, f.make
    FROM trade_in_by_month AS h
    SEMI JOIN vehicles AS v ON v.vin = h.vin
    LEFT JOIN first_valued AS f USING (vin)
    WHERE f.first_month IS NULL OR h.month < f.first_month
),
months AS (
    SELECT unnest(generate_series(
        min(month),
        greatest(max(month), date_trunc('month', current_date)::DATE),
        INTERVAL 1 MONTH))::DATE AS month
    FROM (SELECT valued_month AS month FROM monthly UNION ALL SELECT month FROM history)  -- no value yet: no month
),
counted AS (
    SELECT m.month, sp.vin, sp.valued_month = m.month AS valued, false AS from_history,
           sp.retail, sp.trade_in, sp.loan_value, sp.make
    FROM months AS m
    JOIN spans AS sp ON sp.valued_month <= m.month AND (sp.next_valued_month IS NULL OR m.month < sp.next_valued_month)
    UNION ALL
    SELECT month, vin, false, true, NULL, trade_in, NULL, make FROM history
)
SELECT
    c.month,
    coalesce(s.make, c.make, fleet_file_make(v.extra)) AS make,
    v.fleet,
    count(*) AS vehicles,
    count(*) FILTER (WHERE c.valued) AS valued_in_month,
    count(*) FILTER (WHERE c.from_history) AS trade_in_history_vehicles,
    sum(c.retail) AS total_retail,
    CAST(avg(c.retail) AS DECIMAL(12,2)) AS average_retail,  -- money stays DECIMAL (to the cent)
    sum(c.trade_in) AS total_trade_in,
    sum(c.loan_value) AS total_loan_value
FROM counted AS c
JOIN vehicles AS v USING (vin)
LEFT JOIN specs AS s USING (vin)
GROUP BY ALL;
