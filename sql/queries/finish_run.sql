UPDATE runs SET
    status = $status, finished_at = $finished_at,
    rows_in = coalesce($rows_in, rows_in), valid = coalesce($valid, valid),
    duplicates = coalesce($duplicates, duplicates), rejected = coalesce($rejected, rejected),
    units_used = coalesce($units_used, (SELECT sum(units) FROM api_calls WHERE run_id = $run_id)),
    message = $message
WHERE run_id = $run_id;
