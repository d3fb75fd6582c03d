-- Found answers -> `raw_responses` rows: the body as the service sent it (redacted by the fetch, the key
-- removed again by sql/landing/raw_responses.sql, which also hashes it), what was asked with the VIN.
SELECT CAST(NULL AS VARCHAR) AS response_hash, $dataset AS dataset, vin, CAST(NULL AS VARCHAR) AS batch_id,
    $endpoint AS endpoint,
    '{"vin": ' || to_json(vin) || CASE WHEN request IS NULL OR trim(request) IN ('', '{}') THEN '}'
                                     ELSE ', ' || ltrim(request)[2:] END AS request_params,
    200 AS status, body, fetched_at
FROM staged_found WHERE starts_with(ltrim(body), '{');
