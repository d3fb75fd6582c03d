-- Runs, the fleet roster, rejected input rows, and the cost/failure ledgers.

CREATE TABLE runs (
    run_id        VARCHAR PRIMARY KEY,
    kind          VARCHAR NOT NULL,            -- refresh | backfill | adhoc | reparse
    source_files  VARCHAR[],
    parameters    JSON,
    status        VARCHAR NOT NULL,            -- running | completed | partial | failed
    started_at    TIMESTAMPTZ NOT NULL,
    finished_at   TIMESTAMPTZ,
    rows_in       BIGINT,
    valid         BIGINT,
    duplicates    BIGINT,
    rejected      BIGINT,
    units_used    BIGINT,
    message       VARCHAR
);

CREATE TABLE vehicles (
    vin                VARCHAR PRIMARY KEY,
    unit_number        VARCHAR,
    plate              VARCHAR,
    state              VARCHAR,
    mileage            BIGINT,
    fleet              VARCHAR,
    extra              JSON,                   -- every other column of the fleet file, by its snake_case header
    check_digit_valid  BOOLEAN,
    duplicate_count    BIGINT NOT NULL DEFAULT 0,
    source_file        VARCHAR,
    source_row         BIGINT,
    first_seen_at      TIMESTAMPTZ,
    first_seen_run_id  VARCHAR,
    run_id             VARCHAR NOT NULL,
    fetched_at         TIMESTAMPTZ NOT NULL    -- when this roster row was read
);

CREATE TABLE rejected_rows (
    run_id       VARCHAR NOT NULL,
    source_file  VARCHAR NOT NULL,
    source_row   BIGINT NOT NULL,
    raw_value    VARCHAR,
    reason       VARCHAR NOT NULL,             -- missing | wrong_length | invalid_characters | check_digit
    fetched_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, source_file, source_row)
);

CREATE TABLE api_calls (
    call_id        VARCHAR PRIMARY KEY,
    run_id         VARCHAR NOT NULL,
    endpoint       VARCHAR NOT NULL,           -- path without query string, e.g. /v2/marketvalue
    method         VARCHAR,
    vin            VARCHAR,
    batch_id       VARCHAR,
    status         INTEGER,                    -- HTTP status; NULL when no answer (connection error, timeout)
    units          INTEGER,                    -- usage units / credits the call consumed
    latency_ms     DOUBLE,
    attempt        INTEGER,                    -- 1 for the first try, 2.. for retries
    error_message  VARCHAR,
    fetched_at     TIMESTAMPTZ NOT NULL        -- when the call was made
);

CREATE TABLE failures (
    vin              VARCHAR NOT NULL,
    dataset          VARCHAR NOT NULL,         -- specs | market_values | recalls | history | lien_theft
    status           INTEGER,
    message          VARCHAR,
    retryable        BOOLEAN,
    attempts         INTEGER NOT NULL,         -- attempts since the failure began, across runs
    run_attempts     INTEGER NOT NULL,         -- attempts made by the latest failing run
    first_failed_at  TIMESTAMPTZ NOT NULL,
    resolved_at      TIMESTAMPTZ,              -- set when a later fetch of this dataset for this VIN succeeded
    resolved_run_id  VARCHAR,
    run_id           VARCHAR NOT NULL,
    fetched_at       TIMESTAMPTZ NOT NULL,     -- latest failed attempt
    PRIMARY KEY (vin, dataset)
);

CREATE TABLE recall_batches (
    batch_id          VARCHAR PRIMARY KEY,
    numeric_batch_id  BIGINT,
    status            VARCHAR NOT NULL,        -- uploading | processing | completed | partial | failed
    idempotency_key   VARCHAR,
    submitted_at      TIMESTAMPTZ,
    completed_at      TIMESTAMPTZ,
    total_vins        INTEGER,
    processed_vins    INTEGER,
    vins_count        INTEGER,                 -- VINs we sent
    vins_chunk        VARCHAR,                 -- where the chunk's VIN list is staged (path)
    webhook_url       VARCHAR,
    message           VARCHAR,
    run_id            VARCHAR NOT NULL,
    fetched_at        TIMESTAMPTZ NOT NULL     -- latest status seen
);
