-- Today's value per make and fleet/depot, from each roster vehicle's latest valuation.
SELECT coalesce(make, '(unknown)') AS make, coalesce(fleet, '(none)') AS fleet,
       count(*) AS vehicles, count(retail) AS valued, sum(retail) AS total_retail, sum(trade_in) AS total_trade_in
FROM vehicle_overview GROUP BY ALL ORDER BY ALL;
