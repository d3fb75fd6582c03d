-- The ledger of applied migrations; created before any migration runs.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     INTEGER PRIMARY KEY,
    name        VARCHAR NOT NULL,
    checksum    VARCHAR NOT NULL,
    applied_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- What the views and the dictionary's comments were last made from (tasks/store/database.py `create_views`):
-- an open that finds the same checksum, and every view named here, re-creates nothing.
CREATE TABLE IF NOT EXISTS schema_views (
    checksum  VARCHAR NOT NULL,
    views     VARCHAR[] NOT NULL,
    made_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
