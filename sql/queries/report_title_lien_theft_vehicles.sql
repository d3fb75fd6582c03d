-- Vehicles with a title brand or a lien/theft event: brands and events per type; at most $limit rows,
-- branded and stolen ones first.
WITH events AS (
    SELECT vin,
           count(*) FILTER (WHERE event = 'Lien') AS liens,
           count(*) FILTER (WHERE event = 'Lien Release') AS lien_releases,
           count(*) FILTER (WHERE event = 'Theft') AS thefts,
           count(*) FILTER (WHERE event = 'Recovery') AS recoveries,
           count(*) AS events
    FROM lien_theft_events GROUP BY vin
)
SELECT o.vin, o.unit_number, o.fleet, o.year, o.make, o.model,
       array_to_string(o.title_brands, ', ') AS title_brands,
       coalesce(e.liens, 0) AS liens, coalesce(e.lien_releases, 0) AS lien_releases,
       coalesce(e.thefts, 0) AS thefts, coalesce(e.recoveries, 0) AS recoveries
FROM vehicle_overview AS o
LEFT JOIN events AS e USING (vin)
WHERE len(o.title_brands) > 0 OR e.events > 0
ORDER BY len(o.title_brands) > 0 DESC, coalesce(e.thefts, 0) > coalesce(e.recoveries, 0) DESC, o.unit_number, o.vin
LIMIT $limit;
