INSERT INTO runs (run_id, kind, source_files, parameters, status, started_at)
VALUES ($run_id, $kind, $source_files, $parameters, 'running', $started_at)
ON CONFLICT (run_id) DO NOTHING;
