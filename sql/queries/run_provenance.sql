-- What every row a run lands carries besides its run_id (tasks/store/database.py stamps it): the run's place in
-- the order runs arrived (0: a run this database does not hold, before every run) and the service it called.
SELECT coalesce(max(run_seq), 0) AS run_seq, max(service) AS service FROM runs WHERE run_id = $run_id;
