-- Vehicles with an open campaign telling the owner to park it (or park it outside), one row per
-- vehicle and campaign, confirmed ones first; at most $limit rows (report_headline counts them all).
SELECT vin, unit_number, plate, fleet, year, make, model, nhtsa_campaign_number, component,
       CASE WHEN park_it THEN 'park it' ELSE 'park outside' END AS instruction,
       matched_by, first_seen_at, days_open, summary
FROM open_recalls SEMI JOIN vehicles USING (vin)
WHERE park_it OR park_outside
ORDER BY matched_by = 'model', park_it DESC, days_open DESC, unit_number, vin, nhtsa_campaign_number
LIMIT $limit;
