-- What tells where the roster's vehicles are registered (tasks/ingest/markets.py reads it: the VIN's first character,
-- the file's state and country, whether /specs decoded the VIN through its international fallback), grouped,
-- and per dataset of $datasets how many of each group have an answer: `fleet status` tells the VINs a dataset
-- does not apply to from the ones still pending. A few hundred groups at most, whatever the roster's size.
SELECT left(v.vin, 1) AS vin, v.state, v.extra->>'country' AS country, s.is_international AS specs_international,
       d.dataset, count(*) AS roster, count(f.vin) AS answered
FROM vehicles AS v
LEFT JOIN specs AS s ON s.vin = v.vin
CROSS JOIN (SELECT unnest($datasets::VARCHAR[]) AS dataset) AS d
LEFT JOIN fetch_status AS f ON f.vin = v.vin AND f.dataset = d.dataset
GROUP BY ALL;
