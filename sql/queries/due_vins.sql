-- The run's roster VINs whose $dataset answer is missing or older than $fresh_after (all of them with $force).
-- A "no data" answer (404) is fresh only until $no_data_after: the service caches "not found" for about a
-- day and bills no 404, so asking again after a shorter window costs little and may find data.
-- Never fresh: an answer dated after $future_after (a clock that was ahead would keep it fresh for as long again),
-- or one another service than $service gave (NULL, recorded before services were, counts as $service's). A NULL
-- $future_after or $service leaves that rule out.
-- The mileage is the one valuations use (the view vehicle_mileage).
SELECT v.vin, v.state, m.valuation_mileage AS mileage, m.valuation_mileage_unit AS mileage_unit, v.condition,
       f.fetched_at AS last_fetched_at, f.outcome AS last_outcome, f.service AS last_service
FROM vehicles AS v
LEFT JOIN vehicle_mileage AS m ON m.vin = v.vin
LEFT JOIN fetch_status AS f ON f.vin = v.vin AND f.dataset = $dataset
WHERE v.run_id = $run_id
  AND ($force OR f.fetched_at IS NULL
       OR f.fetched_at < CASE WHEN f.outcome = 'no_data' THEN coalesce($no_data_after::TIMESTAMPTZ, $fresh_after::TIMESTAMPTZ)
                              ELSE $fresh_after::TIMESTAMPTZ END
       OR coalesce(f.fetched_at > $future_after::TIMESTAMPTZ, false)
       OR coalesce(f.service <> $service::VARCHAR, false))
ORDER BY v.vin;
