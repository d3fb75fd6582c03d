-- The staged answers (the journal's rows, tasks/journal.py, registered as `answers`) a landing shreds:
-- each VIN's final answer, its body as JSON, fetched when it was answered.
CREATE OR REPLACE TEMP VIEW found AS
SELECT vin, answered_at AS fetched_at, CAST(request AS JSON) AS request, json(decode(body)) AS body
FROM answers WHERE outcome = 'found';

CREATE OR REPLACE TEMP VIEW no_data AS
SELECT vin, answered_at AS fetched_at FROM answers WHERE outcome = 'no_data';
