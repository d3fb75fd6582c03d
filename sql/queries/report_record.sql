-- Record the report a run wrote (table reports); written again by the same run, the newer one stands.
INSERT OR REPLACE INTO reports (run_id, written_at, path, changes_since, changes, to_do)
VALUES ($run_id, $written_at::TIMESTAMPTZ, $path, $changes_since::TIMESTAMPTZ, $changes, $to_do);
