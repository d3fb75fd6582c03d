-- Vehicles with a title brand, an active lien or a theft not recovered now (vehicle_overview), at most
-- $limit rows: stolen first, then branded, then liens; past events only counted.
SELECT o.vin, o.unit_number, o.fleet, o.year, o.make, o.model,
       array_to_string(o.title_brands, ', ') AS title_brands,
       o.active_liens, array_to_string(o.active_lienholders, ', ') AS lienholders,
       o.stolen_not_recovered, o.lien_theft_events
FROM vehicle_overview AS o
WHERE len(o.title_brands) > 0 OR o.active_liens > 0 OR o.stolen_not_recovered
ORDER BY coalesce(o.stolen_not_recovered, false) DESC, len(o.title_brands) > 0 DESC, o.unit_number, o.vin
LIMIT $limit;
