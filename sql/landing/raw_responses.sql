-- Defence in depth: the client redacts, and the API key echoed in `input.key` is removed here again. A row
-- that comes with its hash was redacted and hashed where it was shredded (sql/shred/_raw_responses.sql): the
-- writer does not parse its body again.
UPDATE incoming SET body = json_merge_patch(body, '{"input": {"key": null}}')
WHERE response_hash IS NULL AND json_exists(body, '$.input.key');

UPDATE incoming SET request_params = json_merge_patch(request_params, '{"key": null}')
WHERE response_hash IS NULL AND json_exists(request_params, '$.key');

UPDATE incoming SET response_hash = sha256(concat_ws('|', dataset, coalesce(vin, ''), coalesce(batch_id, ''),
                                                      CAST(body AS VARCHAR)))
WHERE response_hash IS NULL;

-- The same answer received again keeps one row, dated by its latest receipt (latest in the order answers arrived:
-- run_seq, then fetched_at), from that receipt's service: a re-parse then treats it as the newest answer it is.
-- Answers held already go through the MERGE, new ones through a plain INSERT (a MERGE costs several times an
-- insert per new row).
MERGE INTO raw_responses AS t
USING (SELECT * FROM incoming AS i WHERE EXISTS (SELECT 1 FROM raw_responses AS h WHERE h.response_hash = i.response_hash)
       AND rowid IN (SELECT arg_max(rowid, fetched_at) FROM incoming GROUP BY response_hash)) AS s
ON t.response_hash = s.response_hash
WHEN MATCHED AND (s.run_seq, s.fetched_at) > (t.run_seq, t.fetched_at) THEN UPDATE SET
    fetched_at = s.fetched_at, run_id = s.run_id, run_seq = s.run_seq, service = s.service;

INSERT INTO raw_responses BY NAME
SELECT * FROM incoming AS i WHERE NOT EXISTS (SELECT 1 FROM raw_responses AS h WHERE h.response_hash = i.response_hash)
AND rowid IN (SELECT arg_max(rowid, fetched_at) FROM incoming GROUP BY response_hash);
