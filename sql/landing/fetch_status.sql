-- Latest successful answer per VIN and dataset; an older answer landing late changes nothing. "Older" is by the
-- order answers arrived, (run_seq, fetched_at): a run whose clock was behind still replaces what earlier runs left.
MERGE INTO fetch_status AS t
USING (SELECT * FROM incoming QUALIFY row_number() OVER (PARTITION BY vin, dataset ORDER BY run_seq DESC, fetched_at DESC) = 1) AS s
ON t.vin = s.vin AND t.dataset = s.dataset
WHEN MATCHED AND (s.run_seq, s.fetched_at) >= (t.run_seq, t.fetched_at) THEN UPDATE SET
    outcome = s.outcome, run_id = s.run_id, fetched_at = s.fetched_at, run_seq = s.run_seq, service = s.service
WHEN NOT MATCHED THEN INSERT BY NAME;

-- A successful answer (data or a stable "no data") resolves that VIN's open failure for the dataset.
UPDATE failures AS f
SET resolved_at = s.fetched_at, resolved_run_id = s.run_id
FROM (SELECT vin, dataset, max(fetched_at) AS fetched_at, arg_max(run_id, fetched_at) AS run_id, max(run_seq) AS run_seq
      FROM incoming GROUP BY vin, dataset) AS s
WHERE f.vin = s.vin AND f.dataset = s.dataset AND f.resolved_at IS NULL
  AND (f.run_seq, f.fetched_at) <= (s.run_seq, s.fetched_at);

-- The newest answer wins, an empty one included: a VIN's rows older than its newest answer go (a released
-- lien, a cleared title brand, an owner no longer on record), whether that answer was a report without
-- them or a 404 "no data". Specs and valuations keep theirs: a decode does not expire, valuations are a
-- history. (Recall campaigns are closed by the recall check itself, see recall_checks.sql.)
DELETE FROM lien_theft_events
WHERE EXISTS (SELECT 1 FROM fetch_status AS f SEMI JOIN incoming AS i ON i.vin = f.vin AND i.dataset = f.dataset
              WHERE f.dataset = 'lien_theft' AND f.vin = lien_theft_events.vin
                AND (f.run_seq, f.fetched_at) > (lien_theft_events.run_seq, lien_theft_events.fetched_at));

DELETE FROM history_reports
WHERE EXISTS (SELECT 1 FROM fetch_status AS f SEMI JOIN incoming AS i ON i.vin = f.vin AND i.dataset = f.dataset
              WHERE f.dataset = 'history' AND f.vin = history_reports.vin
                AND (f.run_seq, f.fetched_at) > (history_reports.run_seq, history_reports.fetched_at));

DELETE FROM ownership_records
WHERE EXISTS (SELECT 1 FROM fetch_status AS f SEMI JOIN incoming AS i ON i.vin = f.vin AND i.dataset = f.dataset
              WHERE f.dataset = 'ownership' AND f.vin = ownership_records.vin
                AND (f.run_seq, f.fetched_at) > (ownership_records.run_seq, ownership_records.fetched_at));
