-- How many changes of each kind a run recorded (most severe kinds first), and the run's totals:
-- changes, vehicles, and the vehicles to park now and to park outside.
SELECT kind, count(*) AS changes,
       min(CASE severity WHEN 'park_now' THEN 1 WHEN 'park_outside' THEN 2 WHEN 'high' THEN 3 ELSE 4 END) AS rank,
       sum(count(*)) OVER () AS total,
       (SELECT count(DISTINCT vin) FROM changes WHERE run_id = $run_id) AS vehicles,
       (SELECT count(DISTINCT vin) FROM changes WHERE run_id = $run_id AND severity = 'park_now') AS park_now,
       (SELECT count(DISTINCT vin) FROM changes WHERE run_id = $run_id AND severity = 'park_outside') AS park_outside
FROM changes
WHERE run_id = $run_id
GROUP BY kind
ORDER BY rank, changes DESC, kind;
