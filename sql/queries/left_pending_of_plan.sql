-- The VINs of a run's due list for $dataset (registered as `planned_vins`) that nothing settled since the run
-- started ($started_at): no answer (fetch_status) and no failure. What the run leaves pending.
SELECT p.vin
FROM planned_vins AS p
WHERE NOT EXISTS (SELECT 1 FROM fetch_status AS a
                  WHERE a.vin = p.vin AND a.dataset = $dataset AND a.fetched_at >= $started_at::TIMESTAMPTZ)
  AND NOT EXISTS (SELECT 1 FROM failures AS f
                  WHERE f.vin = p.vin AND f.dataset = $dataset AND f.fetched_at >= $started_at::TIMESTAMPTZ)
ORDER BY p.vin;
