-- What the views and the dictionary were made from when last created (tasks/store/database.py `create_views`):
-- an open whose views, macros and dictionary are already these skips making them again (about a second an open).
CREATE TABLE schema_views (
    fingerprint  VARCHAR NOT NULL,                 -- sha256 of sql/views/*.sql, sql/dictionary/*.toml, DuckDB's version
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
