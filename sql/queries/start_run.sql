INSERT INTO runs (run_id, kind, source_files, parameters, status, started_at, prefect_flow_run_id)
VALUES ($run_id, $kind, $source_files, $parameters, 'running', $started_at, $prefect_flow_run_id)
ON CONFLICT (run_id) DO NOTHING;
