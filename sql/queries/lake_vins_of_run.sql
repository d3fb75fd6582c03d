-- The VINs a run answered or failed: in the lake, a partition where only their rows are new gets them as a file
-- of its own instead of being written again whole (tasks/store/lake.py, "appended").
SELECT vin FROM fetch_status WHERE run_id = $run_id
UNION
SELECT vin FROM failures WHERE run_id = $run_id AND vin IS NOT NULL;
