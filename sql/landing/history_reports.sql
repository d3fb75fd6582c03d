-- Title brands: taken as given, else read from brandsInformation elements (their fields are not
-- specified; the first of brand/name/title_brand/brandName/description that is present is used).
-- An answer older than the VIN's newest (a late replay, a re-parse) lands nothing, even when the newest was
-- "no data" (see fetch_status.sql).
DELETE FROM incoming
WHERE EXISTS (SELECT 1 FROM fetch_status AS f
              WHERE f.vin = incoming.vin AND f.dataset = 'history' AND f.fetched_at > incoming.fetched_at);

MERGE INTO history_reports AS t
USING (
    SELECT * REPLACE (coalesce(title_brands, list_filter(list_transform(brands_information,
        lambda b: coalesce(b->>'brand', b->>'name', b->>'title_brand', b->>'brandName', b->>'description')),
        lambda x: x IS NOT NULL)) AS title_brands)
    FROM incoming QUALIFY row_number() OVER (PARTITION BY vin ORDER BY fetched_at DESC) = 1
) AS s
ON t.vin = s.vin
WHEN MATCHED AND s.fetched_at >= t.fetched_at THEN UPDATE
WHEN NOT MATCHED THEN INSERT BY NAME;
