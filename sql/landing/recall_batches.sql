-- Status only moves forward (in the order answers arrived: run_seq, then fetched_at): an older status report
-- never overwrites a newer one.
MERGE INTO recall_batches AS t
USING (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY batch_id ORDER BY fetched_at DESC) = 1) AS s
ON t.batch_id = s.batch_id
WHEN MATCHED AND (s.run_seq, s.fetched_at) >= (t.run_seq, t.fetched_at) THEN UPDATE SET
    numeric_batch_id = coalesce(s.numeric_batch_id, t.numeric_batch_id), status = s.status,
    idempotency_key = coalesce(s.idempotency_key, t.idempotency_key),
    submitted_at = coalesce(s.submitted_at, t.submitted_at), completed_at = coalesce(s.completed_at, t.completed_at),
    total_vins = coalesce(s.total_vins, t.total_vins), processed_vins = coalesce(s.processed_vins, t.processed_vins),
    vins_count = coalesce(s.vins_count, t.vins_count), vins_chunk = coalesce(s.vins_chunk, t.vins_chunk),
    webhook_url = coalesce(s.webhook_url, t.webhook_url), message = s.message,
    run_id = s.run_id, fetched_at = s.fetched_at, run_seq = s.run_seq, service = s.service
WHEN NOT MATCHED THEN INSERT BY NAME;

-- A ledger entry written before submitting ("pending:<idempotency key>") gives way to the real batch.
DELETE FROM recall_batches
WHERE batch_id IN (SELECT 'pending:' || idempotency_key FROM incoming
                   WHERE idempotency_key IS NOT NULL AND batch_id NOT LIKE 'pending:%');
