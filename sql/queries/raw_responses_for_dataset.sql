-- Stored answers to re-parse after a model change, without paying for the calls again.
SELECT response_hash, vin, batch_id, endpoint, status, body, run_id, fetched_at
FROM raw_responses WHERE dataset = $dataset ORDER BY fetched_at;
