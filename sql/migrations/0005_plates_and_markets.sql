-- Call only what can answer (issue 10): where each roster VIN came from, every plate lookup made,
-- and the VINs a dataset does not apply to (their market is not one the service answers for).

ALTER TABLE vehicles ADD COLUMN vin_source VARCHAR DEFAULT 'file';   -- file | plate (looked up by plate and state)

ALTER TABLE run_datasets ADD COLUMN not_applicable BIGINT;           -- roster VINs outside the dataset's markets

CREATE TABLE plate_resolutions (
    plate       VARCHAR NOT NULL,              -- as sent: upper case, no spaces or dashes
    state       VARCHAR,                       -- as sent; NULL when the country needs none
    country     VARCHAR NOT NULL,              -- ISO 3166-1 alpha-2, always sent
    vin         VARCHAR,                       -- the VIN the decoder answered (outcome found)
    outcome     VARCHAR NOT NULL,              -- found | not_found | failed
    status      INTEGER,                       -- HTTP status of the last attempt; NULL when no answer came
    message     VARCHAR,                       -- why not found or failed
    run_id      VARCHAR NOT NULL,
    fetched_at  TIMESTAMPTZ NOT NULL           -- when the decoder answered
);
