-- The order answers arrived in (issue 26): `run_seq`, 1, 2, 3... in the order runs started in this database,
-- whatever their clocks said. "Latest" is decided by (run_seq, fetched_at), not by the timestamp alone, so a
-- run whose clock was behind still replaces what earlier runs left, and one whose clock was ahead does not
-- outrank the runs after it. Every answer table carries the run_seq of its row's run_id.
-- Runs before this migration are numbered in the order of their start times; rows of a run the table `runs`
-- does not hold get 0 (before every run).
ALTER TABLE runs ADD COLUMN run_seq BIGINT;
UPDATE runs SET run_seq = n.run_seq
FROM (SELECT run_id, row_number() OVER (ORDER BY started_at, run_id) AS run_seq FROM runs) AS n
WHERE runs.run_id = n.run_id;

ALTER TABLE fetch_status ADD COLUMN run_seq BIGINT;
UPDATE fetch_status SET run_seq = coalesce((SELECT r.run_seq FROM runs AS r WHERE r.run_id = fetch_status.run_id), 0);
ALTER TABLE raw_responses ADD COLUMN run_seq BIGINT;
UPDATE raw_responses SET run_seq = coalesce((SELECT r.run_seq FROM runs AS r WHERE r.run_id = raw_responses.run_id), 0);
ALTER TABLE failures ADD COLUMN run_seq BIGINT;
UPDATE failures SET run_seq = coalesce((SELECT r.run_seq FROM runs AS r WHERE r.run_id = failures.run_id), 0);
ALTER TABLE specs ADD COLUMN run_seq BIGINT;
UPDATE specs SET run_seq = coalesce((SELECT r.run_seq FROM runs AS r WHERE r.run_id = specs.run_id), 0);
ALTER TABLE market_values ADD COLUMN run_seq BIGINT;
UPDATE market_values SET run_seq = coalesce((SELECT r.run_seq FROM runs AS r WHERE r.run_id = market_values.run_id), 0);
ALTER TABLE trade_in_history ADD COLUMN run_seq BIGINT;
UPDATE trade_in_history SET run_seq = coalesce((SELECT r.run_seq FROM runs AS r WHERE r.run_id = trade_in_history.run_id), 0);
ALTER TABLE history_reports ADD COLUMN run_seq BIGINT;
UPDATE history_reports SET run_seq = coalesce((SELECT r.run_seq FROM runs AS r WHERE r.run_id = history_reports.run_id), 0);
ALTER TABLE lien_theft_events ADD COLUMN run_seq BIGINT;
UPDATE lien_theft_events SET run_seq = coalesce((SELECT r.run_seq FROM runs AS r WHERE r.run_id = lien_theft_events.run_id), 0);
ALTER TABLE ownership_records ADD COLUMN run_seq BIGINT;
UPDATE ownership_records SET run_seq = coalesce((SELECT r.run_seq FROM runs AS r WHERE r.run_id = ownership_records.run_id), 0);
ALTER TABLE recalls ADD COLUMN run_seq BIGINT;
UPDATE recalls SET run_seq = coalesce((SELECT r.run_seq FROM runs AS r WHERE r.run_id = recalls.run_id), 0);
ALTER TABLE recall_checks ADD COLUMN run_seq BIGINT;
UPDATE recall_checks SET run_seq = coalesce((SELECT r.run_seq FROM runs AS r WHERE r.run_id = recall_checks.run_id), 0);
ALTER TABLE recall_batches ADD COLUMN run_seq BIGINT;
UPDATE recall_batches SET run_seq = coalesce((SELECT r.run_seq FROM runs AS r WHERE r.run_id = recall_batches.run_id), 0);
ALTER TABLE plate_resolutions ADD COLUMN run_seq BIGINT;
UPDATE plate_resolutions SET run_seq = coalesce((SELECT r.run_seq FROM runs AS r WHERE r.run_id = plate_resolutions.run_id), 0);
