-- One page of stored answers for $dataset, with what was asked (a valuation's state, mileage and
-- condition are part of its key), paged in a stable order.
-- The same answer is stored once, at its first fetch; when a VIN's newest stored answer was received
-- again later (fetch_status is newer, in the order answers arrived: run_seq, then fetched_at), it is dated and
-- attributed to that latest fetch, which is when the table's row came from it: otherwise the re-parsed row would
-- be "older" and replace nothing.
-- (Recall lookups are checks of their own run, so they keep theirs.)
WITH page AS (
    SELECT response_hash, dataset, vin, batch_id, endpoint, request_params, body, run_id, run_seq, fetched_at
    FROM raw_responses
    WHERE dataset = $dataset
    ORDER BY run_id, fetched_at, response_hash
    LIMIT $limit OFFSET $offset
), newest AS (
    SELECT vin, max((run_seq, fetched_at)) AS arrived FROM raw_responses WHERE dataset = $dataset AND vin IS NOT NULL GROUP BY vin
)
SELECT p.response_hash, p.dataset, p.vin, p.batch_id, p.endpoint, p.request_params, p.body,
       CASE WHEN s.vin IS NOT NULL AND (s.run_seq, s.fetched_at) > (p.run_seq, p.fetched_at) THEN s.run_id ELSE p.run_id END
           AS run_id,
       CASE WHEN s.vin IS NOT NULL AND (s.run_seq, s.fetched_at) > (p.run_seq, p.fetched_at) THEN s.fetched_at
            ELSE p.fetched_at END AS fetched_at
FROM page AS p
LEFT JOIN newest AS n ON n.vin = p.vin AND n.arrived = (p.run_seq, p.fetched_at)
LEFT JOIN fetch_status AS s
       ON n.vin IS NOT NULL AND p.dataset <> 'recalls' AND s.vin = p.vin AND s.dataset = p.dataset AND s.outcome = 'found'
ORDER BY p.run_id, p.fetched_at, p.response_hash;
