-- A run whose flow raised: recorded `failed` with why, unless it already ended (or was never started).
UPDATE runs SET status = 'failed', finished_at = $finished_at, message = $message
WHERE run_id = $run_id AND status = 'running';
