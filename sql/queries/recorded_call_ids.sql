-- Which of these calls the ledger already holds: a journal left by a killed run lands only the others (the
-- store's rows may say more than the journal, e.g. a submit settled once its replay proved it billed).
SELECT call_id FROM api_calls WHERE list_contains($call_ids::VARCHAR[], call_id);
