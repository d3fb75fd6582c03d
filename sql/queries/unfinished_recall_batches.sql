-- Batches submitted but not in a terminal state: poll these before submitting again.
SELECT * FROM recall_batches WHERE status NOT IN ('completed', 'partial', 'failed') ORDER BY submitted_at;
