-- What a run left pending (tasks/steps/refresh_steps.py, record_left_pending). A VIN-dataset left pending again
-- while it still waited (no answer and no failure since the run that left it before started) keeps the first
-- run of the wait (`since_run_id`, `since`); otherwise its wait starts with this run. Landing a run's rows again
-- changes nothing.
UPDATE incoming SET since_run_id = run_id, since = fetched_at;

UPDATE incoming AS i SET since_run_id = t.since_run_id, since = t.since
FROM left_pending AS t
WHERE t.vin = i.vin AND t.dataset = i.dataset
  AND (t.run_id = i.run_id OR (
      NOT EXISTS (SELECT 1 FROM fetch_status AS a
                  WHERE a.vin = t.vin AND a.dataset = t.dataset AND a.fetched_at >= t.run_started_at)
      AND NOT EXISTS (SELECT 1 FROM recall_checks AS c
                      WHERE t.dataset = 'recall_details' AND c.vin = t.vin AND c.campaigns_listed
                        AND c.fetched_at >= t.run_started_at)
      AND NOT EXISTS (SELECT 1 FROM failures AS f
                      WHERE f.vin = t.vin AND f.fetched_at >= t.run_started_at
                        AND (f.dataset = t.dataset OR (t.dataset = 'recall_details' AND f.dataset = 'recalls')))));

MERGE INTO left_pending AS t
USING (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin, dataset ORDER BY fetched_at DESC) = 1) AS s
ON t.vin = s.vin AND t.dataset = s.dataset
WHEN MATCHED AND s.fetched_at >= t.fetched_at THEN UPDATE SET
    reason = s.reason, run_id = s.run_id, run_started_at = s.run_started_at, since_run_id = s.since_run_id,
    since = s.since, fetched_at = s.fetched_at
WHEN NOT MATCHED THEN INSERT BY NAME;
