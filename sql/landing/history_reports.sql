-- Title brands: taken as given, else read from brandsInformation elements (their fields are not
-- specified; the first of brand/name/title_brand/brandName/description that is present is used).
-- An answer older than the VIN's newest (a late replay, a re-parse) lands nothing, even when the newest was
-- "no data" (see fetch_status.sql).
DELETE FROM incoming
WHERE EXISTS (SELECT 1 FROM fetch_status AS f
              WHERE f.vin = incoming.vin AND f.dataset = 'history'
                AND (f.run_seq, f.fetched_at) > (incoming.run_seq, incoming.fetched_at));

MERGE INTO history_reports AS t
USING (
    SELECT * REPLACE (coalesce(title_brands, list_filter(list_transform(brands_information,
        lambda b: coalesce(b->>'brand', b->>'name', b->>'title_brand', b->>'brandName', b->>'description')),
        lambda x: x IS NOT NULL)) AS title_brands)
    FROM incoming QUALIFY row_number() OVER (PARTITION BY vin ORDER BY fetched_at DESC) = 1
) AS s
ON t.vin = s.vin
-- The same data again (a forced refresh, a replayed journal, a re-parse): only the receipt moves on, so
-- identical rows do not pay a whole-row update.
WHEN MATCHED AND (s.run_seq, s.fetched_at) >= (t.run_seq, t.fetched_at) AND row(s.brands_record_count, s.vin_changed, s.title_brands, s.junk_and_salvage_information, s.insurance_information, s.brands_information, s.current_title_information, s.history_information)
         IS NOT DISTINCT FROM row(t.brands_record_count, t.vin_changed, t.title_brands, t.junk_and_salvage_information, t.insurance_information, t.brands_information, t.current_title_information, t.history_information)
    THEN UPDATE SET run_id = s.run_id, fetched_at = s.fetched_at, run_seq = s.run_seq, service = s.service
WHEN MATCHED AND (s.run_seq, s.fetched_at) >= (t.run_seq, t.fetched_at) THEN UPDATE
WHEN NOT MATCHED THEN INSERT BY NAME;
