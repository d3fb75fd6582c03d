-- Today's value per make and fleet/depot, from each roster vehicle's latest valuation.
SELECT coalesce(make, '(unknown)') AS make, coalesce(fleet, '(none)') AS fleet,
       count(*) AS vehicles, count(retail) AS valued,
       -- DOUBLE for the report's charts (JSON numbers); the view keeps money DECIMAL.
       CAST(sum(retail) AS DOUBLE) AS total_retail, CAST(sum(trade_in) AS DOUBLE) AS total_trade_in
FROM vehicle_overview GROUP BY ALL ORDER BY ALL;
