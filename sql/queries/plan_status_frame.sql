-- `plan_status`, for the roster registered as `plan_roster_frame` (tasks/plan/due.py).
SELECT f.vin, f.dataset, f.fetched_at, f.outcome, f.service
FROM fetch_status AS f
WHERE list_contains($datasets, f.dataset)
  AND f.vin IN (SELECT vin FROM plan_roster_frame);
