-- One summary row per run and dataset; a later report of the same run replaces it.
INSERT OR REPLACE INTO run_datasets BY NAME SELECT * FROM incoming;
