-- Fleet value per month, make and fleet/depot (see the view fleet_value_by_month).
SELECT month, coalesce(make, '(unknown)') AS make, coalesce(fleet, '(none)') AS fleet,
       vehicles, valued_in_month, total_retail, total_trade_in
FROM fleet_value_by_month ORDER BY month, make, fleet;
