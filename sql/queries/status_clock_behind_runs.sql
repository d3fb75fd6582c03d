-- Runs that started more than $tolerance_seconds before a run that came before them (in run order, run_seq): their
-- clock was behind (or that earlier run's was ahead), and they ran with --allow-clock-behind or before it existed.
SELECT run_id, kind, started_at, earlier_started_at
FROM (SELECT run_id, kind, started_at,
             max(started_at) OVER (ORDER BY run_seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS earlier_started_at
      FROM runs)
WHERE started_at < earlier_started_at - to_seconds($tolerance_seconds::BIGINT)
ORDER BY started_at;
