-- Fleet value per month, make and fleet/depot (see the view fleet_value_by_month): the months before the
-- first valuation have a trade-in value only (trade_in_history_vehicles of the vehicles; no retail).
SELECT month, coalesce(make, '(unknown)') AS make, coalesce(fleet, '(none)') AS fleet,
       -- DOUBLE for the report's charts (JSON numbers); the view keeps money DECIMAL.
       vehicles, valued_in_month, trade_in_history_vehicles, CAST(total_retail AS DOUBLE) AS total_retail,
       CAST(total_trade_in AS DOUBLE) AS total_trade_in
FROM fleet_value_by_month ORDER BY month, make, fleet;
