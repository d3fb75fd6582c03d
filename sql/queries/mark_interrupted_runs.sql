-- Runs still `running` when a process first opens the file died without finishing (kill -9,
-- power loss): DuckDB lets one process hold the file, so no live process can own them.
UPDATE runs SET
    status = 'interrupted', finished_at = $now,
    message = coalesce(message, 'the process stopped before the run finished; the next run takes over its work')
WHERE status = 'running';
