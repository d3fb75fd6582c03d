-- Defence in depth: the client redacts, and the API key echoed in `input.key` is removed here again.
UPDATE incoming SET body = json_merge_patch(body, '{"input": {"key": null}}')
WHERE json_exists(body, '$.input.key');

UPDATE incoming SET request_params = json_merge_patch(request_params, '{"key": null}')
WHERE json_exists(request_params, '$.key');

UPDATE incoming SET response_hash = sha256(concat_ws('|', dataset, coalesce(vin, ''), coalesce(batch_id, ''),
                                                      CAST(body AS VARCHAR)))
WHERE response_hash IS NULL;

-- The same answer received again keeps one row, dated by its latest receipt (a re-parse then
-- treats it as the newest answer it is).
MERGE INTO raw_responses AS t
USING (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY response_hash ORDER BY fetched_at DESC) = 1) AS s
ON t.response_hash = s.response_hash
WHEN MATCHED AND s.fetched_at > t.fetched_at THEN UPDATE SET fetched_at = s.fetched_at, run_id = s.run_id
WHEN NOT MATCHED THEN INSERT BY NAME;
