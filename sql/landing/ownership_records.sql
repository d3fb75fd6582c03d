-- Latest ownership lookup per VIN.
-- An answer older than the VIN's newest (a late replay, a re-parse) lands nothing, even when the newest was
-- "no data" (see fetch_status.sql).
DELETE FROM incoming
WHERE EXISTS (SELECT 1 FROM fetch_status AS f
              WHERE f.vin = incoming.vin AND f.dataset = 'ownership'
                AND (f.run_seq, f.fetched_at) > (incoming.run_seq, incoming.fetched_at));

MERGE INTO ownership_records AS t
USING (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin ORDER BY fetched_at DESC) = 1) AS s
ON t.vin = s.vin
-- The same data again (a forced refresh, a replayed journal, a re-parse): only the receipt moves on, so
-- identical rows do not pay a whole-row update.
WHEN MATCHED AND (s.run_seq, s.fetched_at) >= (t.run_seq, t.fetched_at) AND row(s.owner_count, s.vehicle, s.owners)
         IS NOT DISTINCT FROM row(t.owner_count, t.vehicle, t.owners)
    THEN UPDATE SET run_id = s.run_id, fetched_at = s.fetched_at, run_seq = s.run_seq, service = s.service
WHEN MATCHED AND (s.run_seq, s.fetched_at) >= (t.run_seq, t.fetched_at) THEN UPDATE
WHEN NOT MATCHED THEN INSERT BY NAME;
