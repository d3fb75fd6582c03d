-- What changed in the latest finished refresh or backfill (view changes_latest_run), most severe first,
-- at most $limit rows; `total` counts them all.
SELECT run_id, vin, unit_number, plate, fleet, year, make, model, dataset, kind, subject, severity,
       before, after, fetched_at, count(*) OVER () AS total
FROM changes_latest_run
SEMI JOIN vehicles USING (vin)
ORDER BY severity_rank, unit_number, vin, kind, subject
LIMIT $limit;
