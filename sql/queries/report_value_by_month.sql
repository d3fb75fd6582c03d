-- Fleet value per month, make and fleet/depot (see the view fleet_value_by_month).
SELECT month, coalesce(make, '(unknown)') AS make, coalesce(fleet, '(none)') AS fleet,
       -- DOUBLE for the report's charts (JSON numbers); the view keeps money DECIMAL.
       vehicles, valued_in_month, CAST(total_retail AS DOUBLE) AS total_retail,
       CAST(total_trade_in AS DOUBLE) AS total_trade_in
FROM fleet_value_by_month ORDER BY month, make, fleet;
