-- Open campaigns per component: confirmed vehicles (matched for their VIN), likely ones (model list only),
-- and how many of them are told to park it, or to park it outside.
SELECT coalesce(component, '(not given)') AS component,
       count(DISTINCT nhtsa_campaign_number) AS campaigns,
       count(DISTINCT vin) FILTER (WHERE matched_by = 'vin') AS vehicles,
       count(DISTINCT vin) FILTER (WHERE matched_by = 'model') AS likely_vehicles,
       count(DISTINCT vin) FILTER (WHERE matched_by = 'vin' AND park_it) AS park_it,
       count(DISTINCT vin) FILTER (WHERE matched_by = 'vin' AND park_outside) AS park_outside
FROM open_recalls SEMI JOIN vehicles USING (vin)
GROUP BY ALL ORDER BY vehicles DESC, likely_vehicles DESC, component;
