-- Fleet value by make, model and model year, from each vehicle's latest valuation.
CREATE OR REPLACE VIEW fleet_value_by_model AS
SELECT
    coalesce(s.make, mv.make) AS make,
    coalesce(s.model, mv.model) AS model,
    coalesce(s.year, mv.model_year) AS model_year,
    count(*) AS vehicles,
    sum(mv.retail) AS total_retail,
    CAST(avg(mv.retail) AS DECIMAL(12,2)) AS average_retail,  -- money stays DECIMAL (to the cent)
    sum(mv.trade_in) AS total_trade_in,
    CAST(avg(mv.trade_in) AS DECIMAL(12,2)) AS average_trade_in,
    sum(mv.loan_value) AS total_loan_value,
    max(mv.valued_on) AS latest_valued_on
FROM vehicles AS v
JOIN latest_market_values AS mv USING (vin)
LEFT JOIN specs AS s USING (vin)
GROUP BY ALL;
