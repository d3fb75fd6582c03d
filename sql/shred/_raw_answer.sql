-- One answer about no single VIN (a recall batch's results, a model's campaign listing; the listing is staged once
-- per VIN it settled) -> its one `raw_responses` row: the body as the service sent it, but an echoed key and a batch
-- token (the client redacts both already), with what was asked as bound; hashed as _raw_responses.sql hashes.
SELECT sha256(concat_ws('|', $dataset, '', coalesce(CAST($batch_id AS VARCHAR), ''), CAST(body AS VARCHAR)))
        AS response_hash,
    $dataset AS dataset, NULL::VARCHAR AS vin, CAST($batch_id AS VARCHAR) AS batch_id, $endpoint AS endpoint,
    CAST($request AS JSON) AS request_params, 200 AS status, body, fetched_at
FROM (SELECT fetched_at,
          CASE WHEN json_exists(b, '$.data.job.batchToken')
               THEN json_merge_patch(b, '{"data": {"job": {"batchToken": null}}}') ELSE b END AS body
      FROM (SELECT fetched_at,
                CASE WHEN json_exists(body, '$.input.key') THEN json_merge_patch(body, '{"input": {"key": null}}')
                     ELSE body END AS b
            FROM found LIMIT 1));
