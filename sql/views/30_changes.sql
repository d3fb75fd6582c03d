-- What changed in the latest finished refresh or backfill, most severe first: vehicles to park now,
-- then to park outside, then the rest. `changes` holds every run's.
CREATE OR REPLACE VIEW changes_latest_run AS
WITH latest AS (
    SELECT run_id FROM runs
    WHERE finished_at IS NOT NULL AND kind IN ('refresh', 'backfill') AND status NOT IN ('planned', 'refused')
    ORDER BY run_seq DESC NULLS LAST, started_at DESC LIMIT 1  -- the latest to arrive, whatever its clock
)
SELECT c.run_id, c.vin, v.unit_number, v.plate, v.fleet, s.year, s.make, s.model,
       c.dataset, c.kind, c.subject, c.severity,
       CASE c.severity WHEN 'park_now' THEN 1 WHEN 'park_outside' THEN 2 WHEN 'high' THEN 3 ELSE 4 END AS severity_rank,
       c.before, c.after, c.fetched_at, c.detected_at
FROM changes AS c
JOIN latest USING (run_id)
LEFT JOIN vehicles AS v USING (vin)
LEFT JOIN specs AS s USING (vin)
ORDER BY severity_rank, c.vin, c.kind, c.subject;

-- How many changes of each kind and severity each run recorded, and on how many vehicles.
CREATE OR REPLACE VIEW change_counts AS
SELECT run_id, kind, severity, count(*) AS changes, count(DISTINCT vin) AS vehicles,
       min(fetched_at) AS first_fetched_at, max(fetched_at) AS last_fetched_at
FROM changes
GROUP BY run_id, kind, severity;
