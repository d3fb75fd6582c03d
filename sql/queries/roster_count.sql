-- How many VINs this run's roster holds.
SELECT count(*) AS vins FROM vehicles WHERE run_id = $run_id;
