-- How many vehicles have a title brand or a lien/theft event (the list is capped; this is not).
SELECT count(*) AS vehicles
FROM vehicle_overview AS o
WHERE len(o.title_brands) > 0 OR o.lien_theft_events > 0;
