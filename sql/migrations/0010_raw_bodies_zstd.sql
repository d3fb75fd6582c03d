-- Stored answers' bodies compressed with zstd, chosen once rather than analysed at every checkpoint: writing
-- 100,000 specs bodies (~120 MB) cost the landing's COMMIT 1.2-1.6 CPU s with DuckDB's own choice
-- (FSST/dictionary, analysed per segment), 0.4-0.7 s less with zstd (2026-11-26, tests/bench/test_raw_first_bench.py).
-- DuckDB sets a column's compression only when the table is created: the table is made again, rows kept.
CREATE TABLE raw_responses_zstd (
    response_hash   VARCHAR PRIMARY KEY,       -- sha256 of dataset, vin, batch and redacted body
    dataset         VARCHAR NOT NULL,
    vin             VARCHAR,
    batch_id        VARCHAR,
    endpoint        VARCHAR,
    request_params  JSON,                      -- never holds the API key
    status          INTEGER,
    body            JSON USING COMPRESSION zstd,  -- redacted: input.key removed
    run_id          VARCHAR NOT NULL,
    fetched_at      TIMESTAMPTZ NOT NULL
);

INSERT INTO raw_responses_zstd SELECT * FROM raw_responses;

DROP TABLE raw_responses;

ALTER TABLE raw_responses_zstd RENAME TO raw_responses;
