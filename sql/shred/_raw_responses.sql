-- Found answers -> `raw_responses` rows: the body as the service sent it, what was asked with the VIN,
-- ready to land as they are: the API key echoed in `input.key` (and a `key` among what was asked) removed
-- once more (the client redacts already), then hashed as sql/landing/raw_responses.sql hashes a row that
-- comes without its hash. Computed where the answers are shredded, so the writer neither parses nor hashes.
SELECT sha256(concat_ws('|', dataset, coalesce(vin, ''), coalesce(batch_id, ''), CAST(body AS VARCHAR))) AS response_hash,
    dataset, vin, batch_id, endpoint, request_params, status, body, fetched_at
FROM (
    SELECT $dataset AS dataset, vin, CAST(NULL AS VARCHAR) AS batch_id, $endpoint AS endpoint,
        CASE WHEN json_exists(asked, '$.key') THEN json_merge_patch(asked, '{"key": null}') ELSE asked END
            AS request_params,
        200 AS status,
        CASE WHEN json_exists(body, '$.input.key') THEN json_merge_patch(body, '{"input": {"key": null}}') ELSE body END
            AS body,
        fetched_at
    FROM (SELECT vin, body, fetched_at,
              CAST('{"vin": ' || to_json(vin) || CASE WHEN request IS NULL OR trim(request) IN ('', '{}') THEN '}'
                                                     ELSE ', ' || ltrim(request)[2:] END AS JSON) AS asked
          FROM staged_found WHERE starts_with(ltrim(body), '{')));
