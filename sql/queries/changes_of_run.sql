-- A run's changes, most severe first (park now, park outside, high, info), with the vehicle's unit
-- number, plate and fleet; `severity` NULL = every severity.
SELECT c.vin, v.unit_number, v.plate, v.fleet, c.dataset, c.kind, c.subject, c.severity, c.before, c.after,
       c.fetched_at
FROM changes AS c
LEFT JOIN vehicles AS v USING (vin)
WHERE c.run_id = $run_id AND ($severity IS NULL OR c.severity = $severity)
ORDER BY CASE c.severity WHEN 'park_now' THEN 1 WHEN 'park_outside' THEN 2 WHEN 'high' THEN 3 ELSE 4 END,
         c.vin, c.kind, c.subject
LIMIT $limit;
