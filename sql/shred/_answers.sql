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
