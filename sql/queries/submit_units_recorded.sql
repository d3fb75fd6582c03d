-- Units already recorded for a recall batch's submit, under its batch id or its ledger entry
-- (`pending:<idempotency key>`, while no batch id was known), known or unknown (sent by a killed run, never
-- answered): was its first acceptance recorded?
SELECT CAST(coalesce(sum(units), 0) AS BIGINT) AS units
FROM api_calls
WHERE method = 'POST' AND list_contains($batch_ids::VARCHAR[], batch_id);
