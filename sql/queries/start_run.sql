-- A run is numbered as it starts (`run_seq`: the order runs arrived in this database, whatever their clocks said)
-- and records the service it calls (never the key).
INSERT INTO runs (run_id, kind, source_files, parameters, status, started_at, prefect_flow_run_id, service, run_seq)
VALUES ($run_id, $kind, $source_files, $parameters, 'running', $started_at, $prefect_flow_run_id, $service,
        (SELECT coalesce(max(run_seq), 0) + 1 FROM runs))
ON CONFLICT (run_id) DO NOTHING;
