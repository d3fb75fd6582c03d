-- A replayed recall batch submit proves its first acceptance was billed, once: the submit's attempts left
-- `unknown` (sent, never answered: a killed run's, landed from its journal) are settled as known. The
-- earliest is what the acceptance cost, unless a known attempt already says so; every other costs 0 (a
-- retry with the same Idempotency-Key is answered from the first, never billed again).
UPDATE api_calls SET billing = 'known',
    units = CASE WHEN call_id = (
        SELECT call_id FROM api_calls
        WHERE method = 'POST' AND billing = 'unknown' AND list_contains($batch_ids::VARCHAR[], batch_id)
          AND NOT EXISTS (SELECT 1 FROM api_calls WHERE method = 'POST' AND billing = 'known' AND units > 0
                          AND list_contains($batch_ids::VARCHAR[], batch_id))
        ORDER BY fetched_at, call_id LIMIT 1) THEN $units ELSE 0 END
WHERE method = 'POST' AND billing = 'unknown' AND list_contains($batch_ids::VARCHAR[], batch_id);
