SELECT started_at FROM runs WHERE run_id = $run_id;
