-- Defence in depth: the client redacts, and the API key echoed in `input.key` is removed here again.
UPDATE incoming SET body = json_merge_patch(body, '{"input": {"key": null}}')
WHERE json_exists(body, '$.input.key');

UPDATE incoming SET request_params = json_merge_patch(request_params, '{"key": null}')
WHERE json_exists(request_params, '$.key');

UPDATE incoming SET response_hash = sha256(concat_ws('|', dataset, coalesce(vin, ''), coalesce(batch_id, ''),
                                                      CAST(body AS VARCHAR)))
WHERE response_hash IS NULL;

INSERT OR IGNORE INTO raw_responses BY NAME
SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY response_hash ORDER BY fetched_at) = 1;
