-- One page of stored answers for $dataset, with what was asked (a valuation's state, mileage and
-- condition are part of its key). Ordered by the run that fetched them so a page lands under few runs.
SELECT response_hash, dataset, vin, batch_id, endpoint, request_params, body, run_id, fetched_at
FROM raw_responses
WHERE dataset = $dataset
ORDER BY run_id, fetched_at, response_hash
LIMIT $limit OFFSET $offset;
