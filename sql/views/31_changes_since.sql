-- What changed since a point in time: every change recorded (detected_at) from `since` on, with the vehicle it
-- concerns, most severe first, then newest first. A table macro, so analysts choose the point:
--   SELECT * FROM changes_since(TIMESTAMPTZ '2026-11-01 00:00:00+00');
--   SELECT * FROM changes_since((SELECT started_at FROM runs WHERE run_id = '20261101T060000Z-1a2b3c'));
--   SELECT * FROM changes_since((SELECT max(written_at) FROM reports));   -- since the last report
-- The fleet report's "What changed" reads it (sql/queries/report_changes.sql).
CREATE OR REPLACE MACRO changes_since(since) AS TABLE
SELECT c.run_id, c.vin, v.unit_number, v.plate, v.fleet, s.year, s.make, s.model,
       c.dataset, c.kind, c.subject, c.severity,
       CASE c.severity WHEN 'park_now' THEN 1 WHEN 'park_outside' THEN 2 WHEN 'high' THEN 3 ELSE 4 END AS severity_rank,
       c.before, c.after, c.fetched_at, c.detected_at
FROM changes AS c
LEFT JOIN vehicles AS v USING (vin)
LEFT JOIN specs AS s USING (vin)
WHERE c.detected_at >= CAST(since AS TIMESTAMPTZ)
ORDER BY severity_rank, c.detected_at DESC, c.vin, c.kind, c.subject;
