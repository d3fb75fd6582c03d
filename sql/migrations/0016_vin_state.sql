-- Every VIN's state findable (issue 30): what a run left pending, which call a failure came from, and
-- failures that the next run may fix marked so.

-- The VIN-datasets a run planned and did not settle (a stop, a budget, the retry window, a pause, faults), one row
-- per VIN and dataset: the latest run that left it, why, and since which run it has waited. Whether it still
-- waits is the view vin_status's to say (an answer or a failure since `run_started_at` settles it), so landing
-- an answer never has to touch this table. `dataset` is the run_datasets name: a dataset, or recall_details.
CREATE TABLE left_pending (
    vin             VARCHAR NOT NULL,
    dataset         VARCHAR NOT NULL,
    reason          VARCHAR,
    run_id          VARCHAR NOT NULL,           -- the latest run that left it pending
    run_started_at  TIMESTAMPTZ NOT NULL,       -- when that run started: an answer since then settles it
    since_run_id    VARCHAR NOT NULL,           -- the first run of this wait (runs that left it pending in a row)
    since           TIMESTAMPTZ NOT NULL,       -- when that first run left it pending
    fetched_at      TIMESTAMPTZ NOT NULL,       -- when the latest run left it pending
    PRIMARY KEY (vin, dataset)
);

-- The path of the call that failed (as api_calls.endpoint has it): a recall check's failure (the batch) is told
-- from its campaign details' (/v1/recalls), both recorded under the dataset `recalls`. NULL before this migration.
ALTER TABLE failures ADD COLUMN endpoint VARCHAR;

-- 5xx answers are worth asking again at the next run (the data dictionary always said so): they were stored as
-- not retryable when the client's own retries gave up. Not the provider-authentication 500s (CV-001, CV-002: the
-- spec says never automatically), nor the legacy routes' validation messages answered with a 500.
UPDATE failures SET retryable = true
WHERE status BETWEEN 500 AND 599 AND NOT coalesce(retryable, false)
  AND NOT (contains(coalesce(message, ''), 'CV-001') OR contains(coalesce(message, ''), 'CV-002'))
  AND NOT starts_with(coalesce(message, ''), 'Missing ')
  AND NOT starts_with(coalesce(message, ''), 'Wrong VIN length')
  AND NOT starts_with(coalesce(message, ''), 'Invalid ')
  AND NOT starts_with(coalesce(message, ''), 'Please supply a make and model')
  AND NOT starts_with(coalesce(message, ''), 'Request body must include');
