-- The staged answers (the journal's rows, tasks/staging/journal.py, registered as `answers`) a landing shreds:
-- each VIN's final answer, its body as JSON, fetched when it was answered. The bodies are validated
-- once, here (a cast keeps the text as sent); every shred file then parses a body once more, itself.
CREATE OR REPLACE TEMP TABLE staged_found AS
SELECT vin, answered_at AS fetched_at, request, try_cast(try(decode(body)) AS JSON) AS body
FROM answers WHERE outcome = 'found';

CREATE OR REPLACE TEMP VIEW found AS
SELECT vin, fetched_at, CAST(request AS JSON) AS request, body
FROM staged_found WHERE starts_with(ltrim(body), '{');

-- Answers the service sent as 200 that are not a JSON object: a failure of that VIN, never a row.
CREATE OR REPLACE TEMP VIEW malformed AS
SELECT vin, fetched_at FROM staged_found WHERE body IS NULL OR NOT starts_with(ltrim(body), '{');

CREATE OR REPLACE TEMP VIEW no_data AS
SELECT vin, answered_at AS fetched_at FROM answers WHERE outcome = 'no_data';

-- A recall batch's results (`/v1/recalls-batch/results`: one answer, `data.results` listing many VINs; answers stored
-- by earlier versions kept `{job, results}` without the envelope) -> its items as the models read them: the VIN as
-- text, the flag and the count (false and 0 when absent). An item the models would refuse (no VIN, a flag or a count
-- that is none) gives no row: its VIN is one the batch ended without, a retryable failure, never a false "no recalls".
CREATE OR REPLACE TEMP VIEW batch_results AS
SELECT vin, has_recalls, recall_count, fetched_at
FROM (SELECT CASE WHEN json_type(r->'vin') = 'VARCHAR' THEN r->>'vin' END AS vin,
          CASE WHEN (r->'hasRecalls') IS NULL THEN false ELSE shred_bool(r->'hasRecalls') END AS has_recalls,
          CASE WHEN (r->'recallCount') IS NULL THEN 0 ELSE shred_int(r->'recallCount') END AS recall_count, fetched_at
      FROM (SELECT fetched_at, unnest(shred_list(coalesce(j.data.results, j.results))) AS r
            FROM (SELECT fetched_at, json_transform(body, '{"data": {"results": "JSON"}, "results": "JSON"}') AS j
                  FROM found)))
WHERE vin IS NOT NULL AND has_recalls IS NOT NULL AND recall_count IS NOT NULL;
