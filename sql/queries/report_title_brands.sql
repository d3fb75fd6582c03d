-- Roster vehicles per title brand (a vehicle with two brands counts under each).
SELECT brand, count(DISTINCT vin) AS vehicles
FROM (SELECT vin, unnest(title_brands) AS brand FROM vehicle_overview)
GROUP BY brand ORDER BY vehicles DESC, brand;
