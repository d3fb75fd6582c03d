-- The fleet reports runs have written (issue 30): a report's "What changed" starts from the previous one's
-- writing (or covers the last 7 days, whichever is longer), so a later run with no change does not empty it.
CREATE TABLE reports (
    run_id         VARCHAR NOT NULL PRIMARY KEY,  -- the refresh or backfill that wrote it (one report a run)
    written_at     TIMESTAMPTZ NOT NULL,          -- when
    path           VARCHAR NOT NULL,              -- where: the HTML page (its to-do list beside it as CSV)
    changes_since  TIMESTAMPTZ NOT NULL,          -- the start of its "What changed" (changes recorded since)
    changes        BIGINT NOT NULL,               -- how many changes it counted there
    to_do          BIGINT NOT NULL                -- rows of its to-do list
);
