-- The last answer (`fetch_status`) of each of the run's roster VINs for the planned $datasets: the planner
-- (tasks/plan/due.py) decides what is due from it (its age, its date, the service that gave it), for every dataset
-- in one read.
SELECT f.vin, f.dataset, f.fetched_at, f.outcome, f.service
FROM fetch_status AS f
WHERE list_contains($datasets, f.dataset)
  AND f.vin IN (SELECT vin FROM vehicles WHERE run_id = $run_id);
