-- Per roster VIN (`plan_unsettled_vins`) and dataset of $datasets, what an earlier run left unsettled: left pending
-- with nothing settling it since (vin_status's rule), or an open failure and whether asking again may help. The
-- planner (tasks/plan/due.py) plans the pending ones and the retryable failures whatever their freshness. A failed
-- campaign lookup (/v1/recalls) is the campaign details', planned by recall_details_due, not the batch's.
SELECT l.vin, l.dataset, true AS pending, CAST(NULL AS BOOLEAN) AS retryable, CAST(NULL AS TIMESTAMPTZ) AS failed_at
FROM left_pending AS l SEMI JOIN plan_unsettled_vins AS r ON r.vin = l.vin
WHERE list_contains($datasets::VARCHAR[], l.dataset)
  AND NOT EXISTS (SELECT 1 FROM fetch_status AS a
                  WHERE a.vin = l.vin AND a.dataset = l.dataset AND a.fetched_at >= l.run_started_at)
  AND NOT EXISTS (SELECT 1 FROM failures AS f
                  WHERE f.vin = l.vin AND f.dataset = l.dataset AND f.fetched_at >= l.run_started_at)
UNION ALL
SELECT f.vin, f.dataset, false, coalesce(f.retryable, true), f.fetched_at
FROM failures AS f SEMI JOIN plan_unsettled_vins AS r ON r.vin = f.vin
WHERE f.resolved_at IS NULL AND list_contains($datasets::VARCHAR[], f.dataset)
  AND NOT (f.dataset = 'recalls' AND coalesce(f.endpoint IN ('/v1/recalls', '/v1/recalls-ymm'), false));
