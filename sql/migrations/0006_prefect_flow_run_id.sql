-- Link both ways between our runs and Prefect's (issue 12): the flow run a run was executed by.
-- Prefect's side holds our run_id as the flow run's name. NULL for runs before this migration.

ALTER TABLE runs ADD COLUMN prefect_flow_run_id VARCHAR;             -- the Prefect flow run's id (a UUID)
