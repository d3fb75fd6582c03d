-- How many vehicles have a title brand, an active lien or a theft not recovered now (the list is capped).
SELECT count(*) AS vehicles
FROM vehicle_overview AS o
WHERE len(o.title_brands) > 0 OR o.active_liens > 0 OR o.stolen_not_recovered;
