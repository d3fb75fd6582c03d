-- One endpoint name across the tables (issue 30): `raw_responses.endpoint` held the endpoint's short name (`specs`,
-- `market-value`, `recalls-batch-results`) where `api_calls.endpoint` holds the service's path (`/specs`,
-- `/v2/marketvalue`), so the two did not join. Answers are now stored under the path; the ones stored before are
-- renamed here (the names and paths of connectors/endpoints.py when this was written). The key (`response_hash`)
-- does not cover the endpoint: no row moves.
UPDATE raw_responses AS r SET endpoint = n.path
FROM (VALUES
    ('specs', '/specs'),
    ('international-vin', '/v1/international-vin-decoder'),
    ('market-value', '/v2/marketvalue'),
    ('market-value-v1', '/marketvalue'),
    ('history', '/history'),
    ('lien-theft', '/v1/lien-theft'),
    ('recalls', '/v1/recalls'),
    ('recalls-ymm', '/v1/recalls-ymm'),
    ('recalls-batch-submit', '/v1/recalls-batch/submit'),
    ('recalls-batch-status', '/v1/recalls-batch/status'),
    ('recalls-batch-results', '/v1/recalls-batch/results'),
    ('recalls-batch-download', '/v1/recalls-batch/download'),
    ('plate', '/v2/platedecoder'),
    ('us-plate', '/v1/us-platedecoder'),
    ('plate-v1', '/platedecoder'),
    ('ownership', '/v1/ownership/vin'),
    ('ownership-phone', '/v1/ownership/phone'),
    ('ownership-phones', '/v1/ownership/phone/bulk'),
    ('ownership-person', '/v1/ownership/person'),
    ('ownership-address', '/v1/ownership/address'),
    ('ownership-zip', '/v1/ownership/zip'),
    ('ymm-options', '/v1/ymm-options'),
    ('year-make-model', '/v1/ymm'),
    ('images', '/images'),
    ('plate-recognition', '/platerecognition'),
    ('vin-ocr', '/v1/vinocr'),
    ('obd', '/obdcodesdecoder')
) AS n(name, path)
WHERE r.endpoint = n.name;
