-- The latest report a run wrote (table reports): the next report's "What changed" starts from its writing.
SELECT run_id, written_at, path, changes_since FROM reports ORDER BY written_at DESC LIMIT 1;
