-- What the fleet was worth at the end of each month, by make and fleet/depot (the fleet file's `fleet`
-- column). Each roster vehicle counts with its latest valuation made on or before that month (a value
-- carries forward until the next one), so a month without a refresh keeps the fleet whole; the months
-- run from the first valuation to the current one, whose figures are today's value.
CREATE OR REPLACE VIEW fleet_value_by_month AS
WITH monthly AS (
    -- Each vehicle's last valuation in each month it was valued.
    SELECT
        mv.vin, date_trunc('month', mv.valued_on)::DATE AS valued_month,
        mv.retail, mv.trade_in, mv.loan_value, mv.make, mv.model_year
    FROM market_values AS mv
    SEMI JOIN vehicles AS v ON v.vin = mv.vin
    QUALIFY row_number() OVER (PARTITION BY mv.vin, date_trunc('month', mv.valued_on)
                               ORDER BY mv.valued_on DESC, mv.fetched_at DESC) = 1
),
spans AS (
    -- Valid from its month until the vehicle's next valued month.
    SELECT *, lead(valued_month) OVER (PARTITION BY vin ORDER BY valued_month) AS next_valued_month
    FROM monthly
),
months AS (
    SELECT unnest(generate_series(
        min(valued_month),
        greatest(max(valued_month), date_trunc('month', current_date)::DATE),
        INTERVAL 1 MONTH))::DATE AS month
    FROM monthly  -- no valuation yet: no month
)
SELECT
    m.month,
    coalesce(s.make, sp.make) AS make,
    v.fleet,
    count(*) AS vehicles,
    count(*) FILTER (WHERE sp.valued_month = m.month) AS valued_in_month,
    sum(sp.retail) AS total_retail,
    CAST(avg(sp.retail) AS DECIMAL(12,2)) AS average_retail,  -- money stays DECIMAL (to the cent)
    sum(sp.trade_in) AS total_trade_in,
    sum(sp.loan_value) AS total_loan_value
FROM months AS m
JOIN spans AS sp ON sp.valued_month <= m.month AND (sp.next_valued_month IS NULL OR m.month < sp.next_valued_month)
JOIN vehicles AS v USING (vin)
LEFT JOIN specs AS s USING (vin)
GROUP BY ALL;
