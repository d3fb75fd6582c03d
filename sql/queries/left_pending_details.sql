-- The run's roster VINs whose campaign details are due (recall_details_waiting, the rule of recall_details_due)
-- and that no campaign lookup failed for since the run started ($started_at): campaign details it leaves pending.
SELECT w.vin
FROM recall_details_waiting() AS w
SEMI JOIN vehicles AS v ON v.vin = w.vin AND v.run_id = $run_id
WHERE NOT EXISTS (SELECT 1 FROM failures AS f WHERE f.vin = w.vin AND f.dataset = 'recalls'
                  AND f.fetched_at >= greatest(w.counted_at, $started_at::TIMESTAMPTZ))
ORDER BY w.vin;
