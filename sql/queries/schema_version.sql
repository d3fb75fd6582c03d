-- The last migration applied to this file (0 when it holds none yet).
SELECT coalesce(max(version), 0) AS version FROM schema_migrations;
