-- Roster VINs never valued, or whose latest valuation is older than $older_than.
SELECT v.vin, v.state, v.mileage, max(mv.fetched_at) AS last_valued_at
FROM vehicles AS v LEFT JOIN market_values AS mv USING (vin)
GROUP BY ALL
HAVING max(mv.fetched_at) IS NULL OR max(mv.fetched_at) < $older_than::TIMESTAMPTZ
ORDER BY v.vin;
