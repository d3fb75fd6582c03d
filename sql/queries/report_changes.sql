-- What changed on roster vehicles since $since (table macro changes_since): most severe first, newest first, at
-- most $limit rows; `total` counts them all, `urgent` those to park now, to park outside or of high severity,
-- `vehicles` the vehicles they concern.
WITH period AS (
    SELECT * FROM changes_since($since::TIMESTAMPTZ) SEMI JOIN vehicles USING (vin)
), counted AS (
    SELECT count(*) AS total, count(*) FILTER (WHERE severity_rank < 4) AS urgent, count(DISTINCT vin) AS vehicles
    FROM period
)
SELECT p.run_id, p.vin, p.unit_number, p.plate, p.fleet, p.year, p.make, p.model, p.dataset, p.kind, p.subject,
       p.severity, p.before, p.after, p.fetched_at, p.detected_at, c.total, c.urgent, c.vehicles
FROM period AS p, counted AS c
ORDER BY p.severity_rank, p.detected_at DESC, p.unit_number, p.vin, p.kind, p.subject
LIMIT $limit;
