-- Which service answered (issue 26): every run records the service it called, and every answer, call and
-- failure the service of the run it came from: the embedded sandbox ('embedded sandbox': made-up answers, on a
-- port that changes with every command) or the base URL, e.g. 'https://api.carsxe.com' (scheme, host, port and
-- path only: never a key, user, password or query). The plan counts an answer fresh only for the service that
-- gave it; the embedded sandbox never lands where another service's answers are.
-- Rows from before this migration keep NULL: unknown, landed before services were recorded (docs/analysts.md
-- says how the plan and the sandbox treat them).
ALTER TABLE runs ADD COLUMN service VARCHAR;
ALTER TABLE fetch_status ADD COLUMN service VARCHAR;
ALTER TABLE raw_responses ADD COLUMN service VARCHAR;
ALTER TABLE api_calls ADD COLUMN service VARCHAR;
ALTER TABLE failures ADD COLUMN service VARCHAR;
ALTER TABLE specs ADD COLUMN service VARCHAR;
ALTER TABLE market_values ADD COLUMN service VARCHAR;
ALTER TABLE trade_in_history ADD COLUMN service VARCHAR;
ALTER TABLE history_reports ADD COLUMN service VARCHAR;
ALTER TABLE lien_theft_events ADD COLUMN service VARCHAR;
ALTER TABLE ownership_records ADD COLUMN service VARCHAR;
ALTER TABLE recalls ADD COLUMN service VARCHAR;
ALTER TABLE recall_checks ADD COLUMN service VARCHAR;
ALTER TABLE recall_batches ADD COLUMN service VARCHAR;
ALTER TABLE plate_resolutions ADD COLUMN service VARCHAR;
